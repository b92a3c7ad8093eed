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
	s.lg.Info("retention policy: sessions idle past their rule's window are purged", zap.String("retain", p.String()),
		zap.Duration("every", s.cfg.Retention.Every))
	s.goLoop(retention.New(s.store, s.cfg.Retention, m, s.lg.Named("retention")).Run)
}
