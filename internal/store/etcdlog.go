package store

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// etcdClientLogger is the logger clientv3 gets: errors only, and not the
// ones that say a call's context ended. clientv3 logs those at ERROR (its
// retry interceptor's "getToken failed" when a call waiting for an auth
// token is canceled), but a canceled call is its caller's decision, and
// the caller reports what matters; on a clean stop they were ERROR lines
// for nothing.
func etcdClientLogger(lg *zap.Logger) *zap.Logger {
	return lg.Named("etcd-client").WithOptions(
		zap.IncreaseLevel(zap.ErrorLevel),
		zap.WrapCore(func(c zapcore.Core) zapcore.Core { return canceledFilter{c} }),
	)
}

// canceledFilter drops entries whose error field is context.Canceled.
type canceledFilter struct{ zapcore.Core }

func (f canceledFilter) With(fields []zapcore.Field) zapcore.Core {
	return canceledFilter{f.Core.With(fields)}
}

func (f canceledFilter) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if f.Enabled(e.Level) {
		return ce.AddCore(e, f)
	}
	return ce
}

func (f canceledFilter) Write(e zapcore.Entry, fields []zapcore.Field) error {
	for _, fd := range fields {
		if err, ok := fd.Interface.(error); ok && fd.Type == zapcore.ErrorType && canceled(err) {
			return nil
		}
	}
	return f.Core.Write(e, fields)
}

// canceled reports whether err says a context ended by cancellation,
// directly or as a gRPC status.
func canceled(err error) bool {
	return errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled
}
