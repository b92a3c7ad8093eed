package controlplane

import (
	"context"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
)

// Policy is the server's authorization table, for tests.
func (s *Server) Policy() authz.Policy { return s.policy }

// ServiceInfo is what the gRPC server serves, for tests.
func (s *Server) ServiceInfo() map[string]grpc.ServiceInfo { return s.grpc.GetServiceInfo() }

// AskNodeWithin asks node to probe its agents (askNodeWithin, waiting at
// most wait), for tests.
func (s *Server) AskNodeWithin(ctx context.Context, node string, wait time.Duration) error {
	_, err := s.askNodeWithin(ctx, node, &castv1.WorkspaceRequest{Op: &castv1.WorkspaceRequest_Probe{Probe: &castv1.ProbeAgentsRequest{}}}, wait)
	return err
}

// DispatchOwner is the owner node the dispatcher keeps for session, for
// tests.
func (s *Server) DispatchOwner(session string) (string, bool) {
	s.dispatch.mu.Lock()
	defer s.dispatch.mu.Unlock()
	o, ok := s.dispatch.owners[session]
	return o.Node, ok
}

// CountSessionsIn sets cast_sessions from a paged read of l, for tests.
func (s *Server) CountSessionsIn(ctx context.Context, l fence.SessionLister) error {
	return s.countSessionsIn(ctx, l)
}

// SessionsCounted is the sum of cast_sessions over its labels, for tests.
func (s *Server) SessionsCounted() float64 {
	n := 0.0
	for _, a := range append(agents.Names(), otherAgent) {
		for _, st := range sessionStates() {
			var m dto.Metric
			if err := s.m.Sessions.WithLabelValues(a, st).Write(&m); err != nil {
				panic(err)
			}
			n += m.GetGauge().GetValue()
		}
	}
	return n
}

// PermissionsWaiting is how many RequestPermission calls wait on a person
// (past their parent's notice), for tests.
func (s *Server) PermissionsWaiting() float64 { return metrics.Value(s.m.PermissionWaiting) }
