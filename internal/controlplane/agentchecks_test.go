package controlplane_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// Canary verdicts steer every user's moves: only nodes (as themselves) and
// admins record them, anyone reads them, and a verdict that names no
// checkable agent, no known capability or a version that is not a plain
// name is refused before anything is stored.
func TestAgentChecksRecordAndRefuse(t *testing.T) {
	t.Parallel()
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

// A migration of a session with history to a node whose version of the
// session's agent failed its canary hands the session off on that node
// instead of moving it; a session of an agent without a failed verdict in
// the same migration moves.
func TestMigrationIntoFailedVersionHandsOff(t *testing.T) {
	t.Parallel()
	c, withHistory := brokenCodexOnDst(t)
	ctx := ctxT(t)
	codexSess, claudeSess := withHistory("codex", "src"), withHistory("claude", "src")

	m, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "dst", SessionIds: []string{codexSess.Id, claudeSess.Id}, SkipWorktree: true})
	if err != nil {
		t.Fatal(err)
	}
	m = waitMigration(t, c, m.Id)
	states := map[string]*castv1.MigrationSession{}
	for _, ms := range m.Sessions {
		states[ms.SessionId] = ms
	}
	ho := states[codexSess.Id]
	if ho.State != castv1.MigrationState_MIGRATION_STATE_HANDED_OFF || ho.HandedOffTo == "" ||
		!strings.Contains(ho.Reason, "Codex "+brokenVersion+" on node dst failed cast's resume check") {
		t.Fatalf("codex session: %+v", ho)
	}
	if st := states[claudeSess.Id].State; st != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		t.Fatalf("claude session %v: %s", st, states[claudeSess.Id].Reason)
	}
	if m.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED || !strings.Contains(m.Reason, "1 of 2 sessions handed off") {
		t.Fatalf("migration %v: %s", m.State, m.Reason)
	}
	src, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: codexSess.Id})
	if err != nil || src.Node != "src" {
		t.Fatalf("the handed-off session moved: %v %v", src, err)
	}
	dst, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: ho.HandedOffTo})
	if err != nil || dst.Node != "dst" || dst.Agent != "codex" || dst.HandoffFrom != codexSess.Id {
		t.Fatalf("handoff session: %v %v", dst, err)
	}
	msgs, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: codexSess.Id})
	if err != nil {
		t.Fatal(err)
	}
	if last := msgs.Messages[len(msgs.Messages)-1]; last.NoticeType != "handoff" || !strings.Contains(last.Text, "A migration to node dst would lose the history") {
		t.Fatalf("no notice saying why: %v", last)
	}
}

// brokenCodexOnDst is a control plane with nodes src (no CLIs) and dst,
// whose codex reports brokenVersion with a failed resume verdict recorded;
// withHistory makes a session of agent on a node with two messages.
func brokenCodexOnDst(t *testing.T) (*client.Client, func(agent, node string) *castv1.Session) {
	binDir := agenttest.DropResumeCodex(t, brokenVersion)
	cp := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, cp.Addr())
	ctx := ctxT(t)
	testharness.StartNode(t, cp.Addr(), "src", nil)
	testharness.StartNode(t, cp.Addr(), "dst", func(cfg *node.Config) {
		cfg.Agents["codex"] = node.AgentSetup{Bin: filepath.Join(binDir, "codex")}
	})
	// Both nodes must be connected: the sessions below are placed on src.
	testharness.WaitFor(t, 20*time.Second, "src connected and dst reports its codex version", func() bool {
		resp, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
		srcUp, dstBroken := false, false
		for _, n := range resp.GetNodes() {
			srcUp = srcUp || (n.Name == "src" && n.Connected)
			for _, in := range n.Agents {
				dstBroken = dstBroken || (n.Name == "dst" && n.Connected && in.Name == "codex" && in.Version == brokenVersion)
			}
		}
		return err == nil && srcUp && dstBroken
	})
	if _, err := c.Agents.RecordAgentChecks(ctx, &castv1.RecordAgentChecksRequest{Checks: []*castv1.AgentCheck{
		{Agent: "codex", Version: brokenVersion, Capability: "resume", Detail: "the model got the new prompt without the history"}}}); err != nil {
		t.Fatal(err)
	}
	return c, func(agent, node string) *castv1.Session {
		sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: agent, Cwd: t.TempDir(), Node: node})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: []*castv1.Message{
			{ClientId: "h1", Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "remember MIG-H1"},
			{ClientId: "h2", Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "noted"},
		}}); err != nil {
			t.Fatal(err)
		}
		return sess
	}
}

// brokenVersion is the codex version brokenCodexOnDst reports.
const brokenVersion = "0.172.0-nohistory"

// A fork with history onto an agent whose version on the fork's node
// failed its canary becomes a handoff from the parent, saying why; a
// switch in place likewise (the source keeps its agent).
func TestForkAndSwitchIntoFailedVersionHandOff(t *testing.T) {
	t.Parallel()
	c, withHistory := brokenCodexOnDst(t)
	ctx := ctxT(t)
	parent := withHistory("claude", "dst")
	fork, err := c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: parent.Id, Agent: "codex", RequestId: "f1"})
	if err != nil {
		t.Fatal(err)
	}
	if fork.HandoffFrom != parent.Id || fork.ParentId != "" || fork.Agent != "codex" || fork.Node != "dst" {
		t.Fatalf("fork: %+v", fork)
	}
	sw, err := c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: parent.Id, Agent: "codex"})
	if err != nil {
		t.Fatal(err)
	}
	if sw.HandoffFrom != parent.Id || sw.Id == parent.Id || sw.Id == fork.Id {
		t.Fatalf("switch: %+v", sw)
	}
	src, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: parent.Id})
	if err != nil || src.Agent != "claude" {
		t.Fatalf("the source changed: %v %v", src, err)
	}
	msgs, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: parent.Id})
	if err != nil {
		t.Fatal(err)
	}
	var notices []string
	for _, m := range msgs.Messages {
		if m.NoticeType == "handoff" {
			notices = append(notices, m.Text)
		}
	}
	if len(notices) != 2 || !strings.Contains(notices[0], "A fork onto Codex would lose the history: Codex "+brokenVersion+" on node dst failed cast's resume check") ||
		!strings.Contains(notices[1], "A switch to Codex would lose the history") {
		t.Fatalf("notices: %q", notices)
	}
	// Without history nothing can be lost: a blank session switches in place.
	blank, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Node: "dst"})
	if err != nil {
		t.Fatal(err)
	}
	if sw, err := c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: blank.Id, Agent: "codex"}); err != nil || sw.Id != blank.Id || sw.Agent != "codex" {
		t.Fatalf("blank switch: %v %v", sw, err)
	}
}
