package controlplane

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/errs"
)

// ErrorDomain is the ErrorInfo domain of every cast error.
const ErrorDomain = "cast.dev"

var kindCodes = map[errs.Kind]codes.Code{
	errs.KindInvalid:            codes.InvalidArgument,
	errs.KindNotFound:           codes.NotFound,
	errs.KindAlreadyExists:      codes.AlreadyExists,
	errs.KindFailedPrecondition: codes.FailedPrecondition,
	errs.KindAborted:            codes.Aborted,
	errs.KindResourceExhausted:  codes.ResourceExhausted,
	errs.KindUnavailable:        codes.Unavailable,
	errs.KindInternal:           codes.Internal,
	errs.KindUnauthenticated:    codes.Unauthenticated,
	errs.KindPermissionDenied:   codes.PermissionDenied,
	errs.KindUnimplemented:      codes.Unimplemented,
}

// toStatus maps any error from a core to a gRPC status with an ErrorInfo.
// It is the only place that does: handlers return toStatus(err).
func toStatus(lg *zap.Logger, err error) error {
	if err == nil {
		return nil
	}
	// A status this package made already (it has its ErrorInfo; or a
	// cancel), and not a cast error merely wrapping one: gRPC's FromError
	// finds a status anywhere in the chain, such as the etcd failure a
	// cast error keeps as its (server-side) cause. A status without one is
	// clientv3's own (a txn cut off mid-call is handed back as etcd's
	// UNAVAILABLE): a store failure, below.
	e, isCast := errs.As(err)
	if st, ok := status.FromError(err); ok && !isCast && (client.ReasonOf(err) != "" || st.Code() == codes.Canceled) {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return withInfo(codes.DeadlineExceeded, "request timed out; its outcome is unknown, retry with the same request_id", errs.ReasonDeadlineExceeded, nil)
	}
	if !isCast {
		// An etcd or I/O failure: the store is unreachable or overloaded.
		lg.Warn("store error", zap.Error(err))
		return withInfo(codes.Unavailable, "the store is unavailable; retry shortly", errs.ReasonUnavailable, nil)
	}
	if e.Kind == errs.KindInternal {
		lg.Error("internal error", zap.String("what", e.Msg), zap.Error(e.Err))
		return withInfo(codes.Internal, "internal error: "+e.Msg, e.Reason, nil)
	}
	return withInfo(kindCodes[e.Kind], e.Msg, e.Reason, e.Metadata)
}

// StatusOf is toStatus for the web listener's own refusals (a body that
// does not decode, a request that is no RPC, a cross-site call), so they
// carry the code and reason the gRPC API gives. They are never internal
// errors, the only ones toStatus logs.
func StatusOf(err error) error { return toStatus(zap.NewNop(), err) }

// statusMessage is the message toStatus gives err: what a response field
// (not the call's status) may show of a failure. toStatus logs what it
// keeps from the caller.
func statusMessage(lg *zap.Logger, err error) string {
	return status.Convert(toStatus(lg, err)).Message()
}

func withInfo(c codes.Code, msg, reason string, md map[string]string) error {
	st, err := status.New(c, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: md})
	if err != nil {
		return status.Error(c, msg)
	}
	return st.Err()
}

// invalid is a request validation failure.
func invalid(format string, args ...any) error {
	e := errs.Invalid(format, args...)
	return withInfo(codes.InvalidArgument, e.Msg, e.Reason, nil)
}
