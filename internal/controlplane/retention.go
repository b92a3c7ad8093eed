package controlplane

import (
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/retention"
)

// startRetention runs the --retain sweep on this replica, when a rule
// purges anything.
func (s *Server) startRetention() {
	p := s.cfg.Retention.Policy
	if !p.Enabled() {
		s.lg.Info("no retention policy: sessions are purged only by `cast rm --purge`")
		return
	}
	rules := make([]string, len(p.Rules))
	for i, r := range p.Rules {
		rules[i] = r.Principal
	}
	m := metrics.NewRetention(s.reg, rules)
	fields := []zap.Field{zap.String("retain", p.String()), zap.Duration("every", s.cfg.Retention.Every)}
	if s.cfg.Retention.DryRun {
		s.lg.Info("retention policy in a dry run: sessions idle past their rule's window are logged and counted, never purged", fields...)
	} else {
		s.lg.Info("retention policy: sessions idle past their rule's window are purged", fields...)
	}
	s.goLoop(retention.New(s.store, s.cfg.Retention, m, s.lg.Named("retention")).Run)
}
