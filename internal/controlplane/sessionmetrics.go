package controlplane

import (
	"context"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/tick"
)

// sessionStates are the state label values of cast_sessions: the stored
// states without their prefix, lower case ("waiting_permission").
func sessionStates() []string {
	var out []string
	for v := range castv1.SessionState_name {
		if st := castv1.SessionState(v); st != castv1.SessionState_SESSION_STATE_UNSPECIFIED {
			out = append(out, stateLabel(st))
		}
	}
	return out
}

func stateLabel(st castv1.SessionState) string {
	return strings.ToLower(strings.TrimPrefix(st.String(), "SESSION_STATE_"))
}

// otherAgent labels sessions of an agent this build does not know, so the
// agent label stays bounded whatever the store holds.
const otherAgent = "other"

// newControlPlaneMetrics registers the replica's metrics with every agent
// and state at 0.
func newControlPlaneMetrics(s *Server) *metrics.ControlPlane {
	m := metrics.NewControlPlane(s.reg)
	metrics.Preinit(m.Sessions, append(agents.Names(), otherAgent), sessionStates())
	return m
}

// countSessionsEvery recounts cast_sessions every d until ctx ends.
func (s *Server) countSessionsEvery(d time.Duration) func(context.Context) {
	return func(ctx context.Context) {
		for {
			if err := s.countSessions(ctx); err != nil && ctx.Err() == nil {
				s.lg.Debug("session count failed", zap.Error(err))
			}
			if !tick.Sleep(ctx, d) {
				return
			}
		}
	}
}

// countSessions sets cast_sessions from one paged read of the store.
func (s *Server) countSessions(ctx context.Context) error {
	return s.countSessionsIn(ctx, s.store)
}

// countSessionsIn sets cast_sessions from one paged read of l.
func (s *Server) countSessionsIn(ctx context.Context, l fence.SessionLister) error {
	known := map[string]bool{}
	for _, a := range agents.Names() {
		known[a] = true
	}
	counts := map[[2]string]int{}
	err := fence.EachSession(ctx, l, 500, true, func(sess *castv1.Session) error {
		agent := sess.Agent
		if !known[agent] {
			agent = otherAgent
		}
		counts[[2]string{agent, stateLabel(sess.State)}]++
		return nil
	})
	if err != nil {
		return err
	}
	for _, a := range append(agents.Names(), otherAgent) {
		for _, st := range sessionStates() {
			s.m.Sessions.WithLabelValues(a, st).Set(float64(counts[[2]string{a, st}]))
		}
	}
	return nil
}

// permissionWait counts a RequestPermission call waiting on a person; the
// returned func records how it ended.
func (s *Server) permissionWait() func(store.Permission, error) {
	start := time.Now()
	s.m.PermissionWaiting.Inc()
	return func(p store.Permission, err error) {
		s.m.PermissionWaiting.Dec()
		outcome := "abandoned" // the caller went away, or the wait timed out
		switch {
		case err == nil && p.Allow:
			outcome = "allowed"
		case err == nil:
			outcome = "denied"
		}
		s.m.PermissionWaitSeconds.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	}
}
