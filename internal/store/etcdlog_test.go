package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestEtcdClientLoggerDropsCanceledCalls(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level zapcore.Level
		err   error
		kept  bool
	}{
		{"an error", zapcore.ErrorLevel, errors.New("etcdserver: no leader"), true},
		{"a canceled call", zapcore.ErrorLevel, context.Canceled, false},
		{"a wrapped cancel", zapcore.ErrorLevel, fmt.Errorf("getToken: %w", context.Canceled), false},
		{"a canceled gRPC status", zapcore.ErrorLevel, status.Error(codes.Canceled, "context canceled"), false},
		{"a deadline is still an error", zapcore.ErrorLevel, context.DeadlineExceeded, true},
		{"a warning", zapcore.WarnLevel, errors.New("retrying"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			lg := etcdClientLogger(zap.New(core)).With(zap.String("k", "v"))
			if ce := lg.Check(tc.level, "clientv3/retry_interceptor: getToken failed"); ce != nil {
				ce.Write(zap.Error(tc.err))
			}
			if got := logs.Len() == 1; got != tc.kept {
				t.Errorf("kept %v, want %v", got, tc.kept)
			}
		})
	}
}
