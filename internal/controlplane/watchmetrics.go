package controlplane

import "github.com/prometheus/client_golang/prometheus"

// registerWatchMetrics exports the fan-out hub's counters: watchers sent
// to catch up from the store (a full buffer, or a new feed) and feeds
// started. Both should stay near flat; a climb means slow watch clients
// or an etcd watch that keeps breaking.
func (s *Server) registerWatchMetrics() {
	s.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cast_controlplane_watch_fell_behind_total",
			Help: "Times a session watch on this replica fell behind the live feed (or the feed restarted) and caught up from the store."},
			func() float64 { return float64(s.watches.Stats().FellBehind) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cast_controlplane_watch_feeds_total",
			Help: "Etcd session feeds this replica started (one runs at a time; each restart sends every watch to catch up)."},
			func() float64 { return float64(s.watches.Stats().Feeds) }),
	)
}
