package controlplane

import (
	"context"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/capability"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/moves"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/validate"
)

// agentService keeps the conformance canaries' verdicts (internal/canary).
type agentService struct {
	castv1.UnimplementedAgentServiceServer
	s *Server
	m *metrics.Canary
}

func (h *agentService) RecordAgentChecks(ctx context.Context, req *castv1.RecordAgentChecksRequest) (*castv1.RecordAgentChecksResponse, error) {
	if err := refuse(validate.Check(validate.Name, "node", req.Node)); err != nil {
		return nil, err
	}
	if len(req.Checks) == 0 || len(req.Checks) > store.MaxAgentChecks {
		return nil, invalid("send 1 to %d checks, not %d", store.MaxAgentChecks, len(req.Checks))
	}
	by := req.Node
	if p, ok := authz.FromContext(ctx); ok && by == "" {
		by = p.String()
	}
	now := timestamppb.Now()
	checks := make([]*castv1.AgentCheck, len(req.Checks))
	for i, c := range req.Checks {
		if err := validCheck(c); err != nil {
			return nil, err
		}
		cp := proto.Clone(c).(*castv1.AgentCheck)
		cp.CheckedBy, cp.CheckTime = by, now
		if cp.Passed {
			cp.Detail = ""
		}
		checks[i] = cp
	}
	if err := h.s.store.PutAgentChecks(ctx, checks); err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	for _, c := range checks {
		if !c.Passed {
			h.m.Failures.WithLabelValues(c.Agent, c.Capability).Inc()
		}
	}
	return &castv1.RecordAgentChecksResponse{Checks: checks}, nil
}

// validCheck refuses a verdict that names no checkable agent, a capability
// the canary does not have, or a version that cannot be a key part.
func validCheck(c *castv1.AgentCheck) error {
	if !capability.Checkable(c.Agent) {
		return invalid("agent %q has no conformance check; use one of %s", c.Agent, strings.Join(capability.Agents(), ", "))
	}
	if !slices.Contains(capability.All, c.Capability) {
		return invalid("capability %q is not checked; use one of %s", c.Capability, strings.Join(capability.All, ", "))
	}
	return refuse(
		validate.Need(validate.Name, "version", c.Version),
		validate.Check(validate.Reason, "detail", c.Detail),
	)
}

func (h *agentService) ListAgentChecks(ctx context.Context, req *castv1.ListAgentChecksRequest) (*castv1.ListAgentChecksResponse, error) {
	if err := refuse(validate.Check(validate.Name, "agent", req.Agent)); err != nil {
		return nil, err
	}
	key := func(c *castv1.AgentCheck) string { return c.Agent + "\x00" + c.Version + "\x00" + c.Capability }
	page, err := pager(req.PageSize, req.PageToken, "agentchecks:"+scope(req.Agent), key)
	if err != nil {
		return nil, err
	}
	checks, err := h.s.store.ListAgentChecks(ctx, req.Agent)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	checks, next, err := page(checks)
	if err != nil {
		return nil, err
	}
	return &castv1.ListAgentChecksResponse{Checks: checks, NextPageToken: next}, nil
}

// migrationDiverter hands off, on the destination, a migrating session
// whose agent's version there failed its canary (moves.Divert).
type migrationDiverter struct{ s *Server }

func (d migrationDiverter) Divert(ctx context.Context, sess *castv1.Session, node string) (string, string, error) {
	return moves.Divert(ctx, d.s.store, d.s.briefer, sess, node)
}

// ListAgents is the registry with the takeover check a switch and a fork
// run (agents.CheckTakeover), so a UI labels exactly what they refuse.
func (h *agentService) ListAgents(context.Context, *castv1.ListAgentsRequest) (*castv1.ListAgentsResponse, error) {
	names := agents.Names()
	out := make([]*castv1.RegisteredAgent, 0, len(names))
	for _, n := range names {
		a, _ := agents.Lookup(n)
		ra := &castv1.RegisteredAgent{Name: n, DisplayName: a.DisplayName, TakesOverHistory: true}
		if err := agents.CheckTakeover(n, true); err != nil {
			ra.TakesOverHistory, ra.Refusal = false, err.Error()
		}
		out = append(out, ra)
	}
	return &castv1.ListAgentsResponse{Agents: out}, nil
}
