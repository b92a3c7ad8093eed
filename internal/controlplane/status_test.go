package controlplane

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/errs"
)

// A core's error reaches the client as its kind's code with its reason,
// and the cause it wraps stays server-side, even when that cause is itself
// a gRPC status (clientv3 hands back etcd's transport failures as ones).
// toStatus used to pass such an error through as the cause's status: the
// cause's code, no ErrorInfo, and the cause's text (etcd's address) in
// the message.
func TestToStatusMapsACastErrorWrappingAStatus(t *testing.T) {
	etcdDown := status.Error(codes.Unavailable, "connection error: dial tcp 10.1.2.3:2379: connect: connection refused")
	tooBig := status.Error(codes.ResourceExhausted, "grpc: received message larger than max (10.1.2.3)")
	for _, tc := range []struct {
		name   string
		err    error
		code   codes.Code
		reason string
	}{
		{"an append's unknown outcome", &errs.Error{Kind: errs.KindUnavailable, Reason: errs.ReasonUnavailable, Err: etcdDown,
			Msg: "the append's outcome is unknown (etcd did not answer its commit); retry with the same client ids"}, codes.Unavailable, errs.ReasonUnavailable},
		{"an internal failure", errs.Internal(tooBig, "replay transcript"), codes.Internal, errs.ReasonInternal},
		{"a refusal with a cause", &errs.Error{Kind: errs.KindFailedPrecondition, Reason: errs.ReasonNotOwner, Err: etcdDown, Msg: "not the owner"},
			codes.FailedPrecondition, errs.ReasonNotOwner},
		// A store read or write handing back clientv3's error as it is (a
		// txn cut off by etcd's restart is not retried): before, it passed
		// through as etcd's own status, without a reason and with etcd's
		// address.
		{"a store's transport failure", etcdDown, codes.Unavailable, errs.ReasonUnavailable},
		{"a store's transport failure, wrapped", fmt.Errorf("read session: %w", etcdDown), codes.Unavailable, errs.ReasonUnavailable},
		{"a refusal already mapped", invalid("page_size must not be negative"), codes.InvalidArgument, errs.ReasonInvalidArgument},
		// Its own reason: UNAVAILABLE is UNAVAILABLE's (it was both).
		{"a deadline that ran out", fmt.Errorf("read session: %w", context.DeadlineExceeded), codes.DeadlineExceeded, errs.ReasonDeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := status.Convert(toStatus(zap.NewNop(), tc.err))
			reason := ""
			for _, d := range st.Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok {
					reason = info.Reason
				}
			}
			if st.Code() != tc.code || reason != tc.reason || strings.Contains(st.Message(), "10.1.2.3") {
				t.Fatalf("got %v %q (reason %q), want %v with reason %s and no cause", st.Code(), st.Message(), reason, tc.code, tc.reason)
			}
		})
	}
}

// A handler's panic is answered INTERNAL with its reason, and nothing of
// what panicked: it was the one refusal with no ErrorInfo.
func TestHandlerPanicHasAReason(t *testing.T) {
	st := status.Convert((&Server{lg: zap.NewNop()}).handlerPanic("secret 10.1.2.3"))
	reason := ""
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason = info.Reason
		}
	}
	if st.Code() != codes.Internal || reason != errs.ReasonInternal || strings.Contains(st.Message(), "10.1.2.3") {
		t.Fatalf("got %v %q (reason %q), want INTERNAL with reason %s and nothing of the panic", st.Code(), st.Message(), reason, errs.ReasonInternal)
	}
}
