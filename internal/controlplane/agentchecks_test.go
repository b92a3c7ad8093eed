package controlplane_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Canary verdicts steer every user's moves: only nodes (as themselves) and
// admins record them, anyone reads them, and a verdict that names no
// checkable agent, no known capability or a version that is not a plain
// name is refused before anything is stored.
func TestAgentChecksRecordAndRefuse(t *testing.T) {
	e := newAuthEnv(t, nil)
	ctx := ctxT(t)
	check := func(agent, version, capability string, passed bool) *castv1.AgentCheck {
		return &castv1.AgentCheck{Agent: agent, Version: version, Capability: capability, Passed: passed, Detail: "lost the history"}
	}
	rec, err := e.n1.Agents.RecordAgentChecks(ctx, &castv1.RecordAgentChecksRequest{Node: "n1",
		Checks: []*castv1.AgentCheck{check("codex", "0.172.0", "resume", false), check("codex", "0.172.0", "write", true)}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Checks[0].CheckedBy != "n1" || rec.Checks[0].CheckTime == nil || rec.Checks[1].Detail != "" {
		t.Fatalf("stored as %+v", rec.Checks)
	}
	if _, err := e.admin.Agents.RecordAgentChecks(ctx, &castv1.RecordAgentChecksRequest{
		Checks: []*castv1.AgentCheck{check("codex", "0.172.0", "resume", true)}}); err != nil {
		t.Fatal(err)
	}
	list, err := e.alice.Agents.ListAgentChecks(ctx, &castv1.ListAgentChecksRequest{Agent: "codex"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Checks) != 2 || list.Checks[0].Capability != "resume" || !list.Checks[0].Passed || !strings.HasPrefix(list.Checks[0].CheckedBy, "admin:") {
		t.Fatalf("the latest verdict per capability, in key order: %+v", list.Checks)
	}

	many := make([]*castv1.AgentCheck, 65)
	for i := range many {
		many[i] = check("codex", "1.0.0", "read", true)
	}
	tests := []struct {
		name   string
		as     string
		req    *castv1.RecordAgentChecksRequest
		code   codes.Code
		reason string
	}{
		{"a user", "alice", &castv1.RecordAgentChecksRequest{Checks: []*castv1.AgentCheck{check("codex", "1.0.0", "read", false)}}, codes.PermissionDenied, errs.ReasonPermissionDenied},
		{"a node as another", "n1", &castv1.RecordAgentChecksRequest{Node: "n2", Checks: []*castv1.AgentCheck{check("codex", "1.0.0", "read", false)}}, codes.PermissionDenied, errs.ReasonNodeMismatch},
		{"no checks", "admin", &castv1.RecordAgentChecksRequest{}, codes.InvalidArgument, errs.ReasonInvalidArgument},
		{"too many checks", "admin", &castv1.RecordAgentChecksRequest{Checks: many}, codes.InvalidArgument, errs.ReasonInvalidArgument},
		{"an agent without a canary", "admin", &castv1.RecordAgentChecksRequest{Checks: []*castv1.AgentCheck{check("cursor", "1.0.0", "read", false)}}, codes.InvalidArgument, errs.ReasonInvalidArgument},
		{"an unknown capability", "admin", &castv1.RecordAgentChecksRequest{Checks: []*castv1.AgentCheck{check("codex", "1.0.0", "telepathy", false)}}, codes.InvalidArgument, errs.ReasonInvalidArgument},
		{"a version with a slash", "admin", &castv1.RecordAgentChecksRequest{Checks: []*castv1.AgentCheck{check("codex", "1/../2", "read", false)}}, codes.InvalidArgument, errs.ReasonInvalidArgument},
		{"no version", "admin", &castv1.RecordAgentChecksRequest{Checks: []*castv1.AgentCheck{check("codex", "", "read", false)}}, codes.InvalidArgument, errs.ReasonInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := map[string]castv1.AgentServiceClient{"alice": e.alice.Agents, "n1": e.n1.Agents, "admin": e.admin.Agents}[tc.as]
			_, err := c.RecordAgentChecks(ctx, tc.req)
			wantDenied(t, tc.name, err, tc.code, tc.reason)
		})
	}
	after, err := e.admin.Agents.ListAgentChecks(ctx, &castv1.ListAgentChecksRequest{})
	if err != nil || len(after.Checks) != 2 {
		t.Fatalf("a refused call stored something: %+v %v", after, err)
	}
}
