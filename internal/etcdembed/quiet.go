package etcdembed

import (
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// shutdownNoise is what etcd logs at ERROR for each listener it closes on
// a clean stop ("mux: server closed", "use of closed network connection").
const shutdownNoise = "setting up serving from embedded etcd failed."

// quietCore drops shutdownNoise once Close has begun: a clean SIGTERM must
// not log ERROR lines. Before that the same message is a real failure to
// serve and is kept.
type quietCore struct {
	zapcore.Core
	closing *atomic.Bool
}

func (c quietCore) With(fs []zapcore.Field) zapcore.Core {
	return quietCore{Core: c.Core.With(fs), closing: c.closing}
}

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.closing.Load() && e.Message == shutdownNoise {
		return ce
	}
	return c.Core.Check(e, ce)
}

// etcdLogger is lg for etcd: errors only, without the shutdown noise.
func etcdLogger(lg *zap.Logger, closing *atomic.Bool) *zap.Logger {
	return lg.Named("etcd").WithOptions(zap.IncreaseLevel(zap.ErrorLevel),
		zap.WrapCore(func(c zapcore.Core) zapcore.Core { return quietCore{Core: c, closing: closing} }))
}
