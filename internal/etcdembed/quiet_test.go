package etcdembed

import (
	"errors"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestEtcdLoggerLevels(t *testing.T) {
	tests := []struct {
		name      string
		closing   bool
		log       func(*zap.Logger)
		wantLevel zapcore.Level
		wantNone  bool
	}{
		{"info is dropped", false, func(l *zap.Logger) { l.Info("raft ready") }, 0, true},
		{"warn is dropped", false, func(l *zap.Logger) { l.Warn("slow fdatasync") }, 0, true},
		{"error is kept", false, func(l *zap.Logger) { l.Error("apply failed") }, zapcore.ErrorLevel, false},
		{"serving failure before close is kept", false, func(l *zap.Logger) { l.Error(shutdownNoise) }, zapcore.ErrorLevel, false},
		{"serving failure while closing is dropped", true, func(l *zap.Logger) { l.Error(shutdownNoise) }, 0, true},
		// etcd retries this every few seconds; on a fresh data dir the
		// first try can run before the first term is saved.
		{"storage version retry is a warning", false, func(l *zap.Logger) {
			l.Error(storageVersionRetry, zap.Error(errors.New("cannot detect storage schema version: missing term information")))
		}, zapcore.WarnLevel, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			var closing atomic.Bool
			closing.Store(tt.closing)
			tt.log(etcdLogger(zap.New(core), &closing))
			got := logs.All()
			if tt.wantNone {
				if len(got) != 0 {
					t.Fatalf("logged %v, want nothing", got)
				}
				return
			}
			if len(got) != 1 || got[0].Level != tt.wantLevel {
				t.Fatalf("logged %v, want one entry at %v", got, tt.wantLevel)
			}
		})
	}
}
