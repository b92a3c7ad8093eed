package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// `cast handoff --account work`: the new session runs with the "work"
// credential set of the node's agents config (its own HOME and key); the
// source keeps the default one. An account the node does not have is
// refused before anything is stored.
func TestHandoffWithAccount(t *testing.T) {
	t.Parallel()
	r := newTurnRigWith(t, func(*controlplane.Config, string) {}, "claude")
	// Give claude a "work" account on the node: restart it with the config.
	workHome := t.TempDir()
	editAgentSetup(t, r, "claude", func(setup map[string]any) {
		setup["accounts"] = map[string]any{"work": map[string]any{"home": workHome, "env": []string{"ANTHROPIC_API_KEY=sk-cast-work-account"}}}
	})
	r.node.Kill()
	markCustodian(t, r, "worker")
	r.startNode()
	testharness.WaitFor(t, 30*time.Second, "the node advertises the work account", func() bool {
		resp, err := r.c.Nodes.ListNodes(context.Background(), &castv1.ListNodesRequest{})
		if err != nil || len(resp.Nodes) != 1 {
			return false
		}
		for _, a := range resp.Nodes[0].Agents {
			if a.Name == "claude" && slices.Contains(a.Accounts, "work") {
				return true
			}
		}
		return false
	})

	ctx := context.Background()
	c := castCLI(t, r)
	src, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "default account MARK-A0"})
	must(t, err)
	r.waitState(src.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	out := c.must("handoff", "-s", src.Id, "--agent", "same", "--account", "work", "-m", "continue MARK-A1", "--json")
	var res struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.ID == "" {
		t.Fatalf("cast handoff --json: %v\n%s", err, out)
	}
	n := r.waitState(res.ID, castv1.SessionState_SESSION_STATE_IDLE, 1)
	if n.Account != "work" {
		t.Fatalf("new session account = %q", n.Account)
	}
	keys := map[string]string{} // marker -> api key the request carried
	for _, req := range r.fake.Turns() {
		body := string(req.Body)
		switch {
		case strings.Contains(body, "MARK-A1"): // the handed-off session's turn
			keys["MARK-A1"] = req.Header.Get("X-Api-Key")
		case strings.Contains(body, "MARK-A0"):
			keys["MARK-A0"] = req.Header.Get("X-Api-Key")
		}
	}
	if keys["MARK-A1"] != "sk-cast-work-account" || keys["MARK-A0"] == "sk-cast-work-account" || keys["MARK-A0"] == "" {
		t.Fatalf("api keys per turn = %v; want the work key only for the handed-off session", keys)
	}
	if entries, _ := os.ReadDir(filepath.Join(workHome, ".claude", "projects")); len(entries) == 0 {
		t.Fatal("the work account's HOME holds no Claude session")
	}
	// A worker the handed-off session spawns follows its account.
	w, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", ParentId: res.ID, Text: "worker MARK-A2"})
	must(t, err)
	r.waitState(w.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	workerTurns := 0
	for _, req := range r.fake.Turns() {
		if strings.Contains(string(req.Body), "MARK-A2") {
			workerTurns++
			if k := req.Header.Get("X-Api-Key"); k != "sk-cast-work-account" {
				t.Fatalf("the worker ran with key %q, not its parent's account", k)
			}
		}
	}
	if workerTurns == 0 {
		t.Fatal("the worker's turn never reached the model")
	}

	// An account the node does not have is refused up front, naming the
	// accounts it has.
	if _, errOut, code := c.run("handoff", "-s", src.Id, "--agent", "same", "--account", "nope"); code != 1 ||
		!strings.Contains(errOut, `no claude account "nope"`) || !strings.Contains(errOut, "work") {
		t.Fatalf("handoff --account nope: exit %d %q", code, errOut)
	}
	if _, errOut, code := c.run("handoff", "-s", src.Id, "--agent", "same", "--account", "../x"); code != 2 || !strings.Contains(errOut, `--account "../x" is malformed`) {
		t.Fatalf("bad account name: exit %d %q", code, errOut)
	}
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}
