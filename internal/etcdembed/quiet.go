package etcdembed

import (
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// shutdownNoise is what etcd logs at ERROR for each listener it closes on
// a clean stop ("mux: server closed", "use of closed network connection").
const shutdownNoise = "setting up serving from embedded etcd failed."

// storageVersionRetry is what etcd logs at ERROR when its storage version
// monitor runs before a fresh data dir has saved its first term ("missing
// term information"). The monitor tries again every few seconds, and the
// storage version matters only to a later downgrade, so it is a warning.
const storageVersionRetry = "failed to update storage version"

// quietCore passes etcd's errors only. It drops shutdownNoise once Close
// has begun (a clean SIGTERM must not log ERROR lines; before that the same
// message is a real failure to serve) and passes storageVersionRetry as a
// warning.
type quietCore struct {
	zapcore.Core
	closing *atomic.Bool
}

func (c quietCore) Enabled(l zapcore.Level) bool {
	return l >= zapcore.ErrorLevel && c.Core.Enabled(l)
}

func (c quietCore) With(fs []zapcore.Field) zapcore.Core {
	return quietCore{Core: c.Core.With(fs), closing: c.closing}
}

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	switch {
	case e.Level < zapcore.ErrorLevel:
		return ce
	case e.Message == shutdownNoise && c.closing.Load():
		return ce
	case e.Message == storageVersionRetry && e.Level == zapcore.ErrorLevel:
		e.Level = zapcore.WarnLevel
	}
	return c.Core.Check(e, ce)
}

// etcdLogger is lg for etcd: errors only, without the noise above.
func etcdLogger(lg *zap.Logger, closing *atomic.Bool) *zap.Logger {
	return lg.Named("etcd").WithOptions(
		zap.WrapCore(func(c zapcore.Core) zapcore.Core { return quietCore{Core: c, closing: closing} }))
}
