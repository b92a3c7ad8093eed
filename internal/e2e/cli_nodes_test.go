package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
)

// A message to a session whose node is down is stored with a warning that
// says when it will run; draining that node fails each session at once with
// a hint to --skip-worktree, which then moves them.
func TestCLIDownNodeSendWarnsAndDrainSuggestsSkipWorktree(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t, "gone", "n2")
	var ids []string
	for range 6 {
		ids = append(ids, r.history("claude", "gone", "work").Id)
	}
	out, errOut, code := r.cli.run("send", "-s", ids[0], "while it is up")
	if code != 0 || strings.Contains(errOut, "warning") {
		t.Fatalf("send to a connected node: exit %d, out %q, err %q", code, out, errOut)
	}
	r.stops["gone"]()
	r.cli.waitNode("gone", false)

	out, errOut, code = r.cli.run("send", "-s", ids[0], "are you there?")
	if code != 0 || !strings.Contains(out, "sent #3") || !strings.Contains(errOut, "node gone is down") || !strings.Contains(errOut, "runs when gone is back") {
		t.Fatalf("send to a down node: exit %d, out %q, err %q", code, out, errOut)
	}

	start := time.Now()
	out, errOut, code = r.cli.run("drain", "gone", "--to", "n2")
	if code != 1 || strings.Count(out, "--skip-worktree") < len(ids) {
		t.Fatalf("drain of a down node: exit %d, out:\n%s\nerr: %s", code, out, errOut)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("drain of a down node took %s to fail", d)
	}
	r.cli.must("drain", "gone", "--to", "n2", "--skip-worktree")
	for _, id := range ids {
		if s, _ := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id}); s.GetNode() != "n2" {
			t.Fatalf("after drain --skip-worktree, %s is on %q", id, s.GetNode())
		}
	}
}

// What no node can run is refused before anything is stored: an agent no
// connected node has, a node without the agent, an account the node lacks.
func TestCLIRefusesUnplaceableSessionsUpFront(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t, "n1")
	r.startNode("n2", func(c *node.Config) {
		c.Agents = map[string]node.AgentSetup{"codex": c.Agents["codex"],
			"claude": {Bin: c.Agents["claude"].Bin, Accounts: map[string]node.AccountSetup{"personal": {}}}}
	})
	_, errOut, code := r.cli.run("new", "--agent", "grok", "--cwd", t.TempDir(), "hello")
	if code != 1 || !strings.Contains(errOut, "no connected node has the grok CLI") || !strings.Contains(errOut, "n1 (claude, codex)") {
		t.Fatalf("new --agent grok: exit %d %q", code, errOut)
	}
	_, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "grok", Cwd: t.TempDir(), Text: "hi"})
	if status.Code(err) != codes.FailedPrecondition || client.ReasonOf(err) != "NO_NODE_AVAILABLE" {
		t.Fatalf("CreateSession grok: %v (reason %q)", err, client.ReasonOf(err))
	}
	r.stops["n1"]()
	r.cli.waitNode("n1", false)
	if _, errOut, code := r.cli.run("new", "--agent", "claude", "--node", "n1", "hello"); code != 1 || !strings.Contains(errOut, "not connected") {
		t.Fatalf("new on a down node: exit %d %q", code, errOut)
	}
	if out := r.cli.must("ls", "--all", "--json"); strings.Contains(out, `"id"`) {
		t.Fatalf("a refused create stored a session:\n%s", out)
	}

	src := r.history("claude", "n2", "the work so far").Id
	_, errOut, code = r.cli.run("handoff", "-s", src, "--agent", "same", "--account", "work", "-m", "go on")
	if code != 1 || !strings.Contains(errOut, `no claude account "work"`) || !strings.Contains(errOut, "personal") {
		t.Fatalf("handoff --account work: exit %d %q", code, errOut)
	}
	_, errOut, code = r.cli.run("handoff", "-s", src, "--agent", "pi", "-m", "go on")
	if code != 1 || !strings.Contains(errOut, "node n2 has no pi CLI") {
		t.Fatalf("handoff --to pi: exit %d %q", code, errOut)
	}
	var list struct {
		Sessions []struct{ ID string } `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(r.cli.must("ls", "--all", "--json")), &list); err != nil || len(list.Sessions) != 1 {
		t.Fatalf("refused handoffs stored sessions: %v %+v", err, list)
	}
	r.cli.must("handoff", "-s", src, "--agent", "same", "--account", "personal", "-m", "go on")
	if err := json.Unmarshal([]byte(r.cli.must("ls", "--all", "--json")), &list); err != nil || len(list.Sessions) != 2 {
		t.Fatalf("handoff --account personal stored no session: %v %+v", err, list)
	}
}

// `cast node rm` forgets a node that is gone; it refuses a connected node
// and one that still owns sessions (unless --force, after which a drain
// still moves them).
func TestCLINodeRemove(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t, "gone", "empty", "n2")
	id := r.history("claude", "gone", "left behind").Id
	if _, errOut, code := r.cli.run("node", "rm", "n2"); code != 1 || !strings.Contains(errOut, "node n2 is connected") {
		t.Fatalf("node rm of a connected node: exit %d %q", code, errOut)
	}
	r.stops["gone"]()
	r.stops["empty"]()
	r.cli.waitNode("gone", false)
	r.cli.waitNode("empty", false)
	if _, errOut, code := r.cli.run("node", "rm", "gone"); code != 1 || !strings.Contains(errOut, "still owns 1 session") ||
		!strings.Contains(errOut, "cast drain gone --skip-worktree") || !strings.Contains(errOut, "--force") {
		t.Fatalf("node rm of a node with sessions: exit %d %q", code, errOut)
	}
	if _, errOut, code := r.cli.run("node", "rm", "nosuch"); code != 1 || !strings.Contains(errOut, "not registered") {
		t.Fatalf("node rm of an unknown node: exit %d %q", code, errOut)
	}
	r.cli.must("node", "rm", "empty")
	if out := r.cli.must("node", "rm", "gone", "--force"); !strings.Contains(out, "1 session(s)") {
		t.Fatalf("node rm --force: %q", out)
	}
	for _, n := range r.cli.nodes() {
		if n.Name == "gone" || n.Name == "empty" {
			t.Fatalf("cast nodes still lists %s", n.Name)
		}
	}
	r.cli.must("drain", "gone", "--to", "n2", "--skip-worktree")
	if s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id}); err != nil || s.Node != "n2" {
		t.Fatalf("the forgotten node's session after a drain: %v %v", s, err)
	}
}
