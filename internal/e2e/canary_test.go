package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// brokenCodex is the version DropResumeCodex reports: a codex update whose
// resume silently starts a new thread.
const brokenCodex = "0.172.0-nohistory"

// TestAgentsCheckTurnsSwitchIntoHandoff is issue 14's canary flow with the
// real binaries: the node has a codex whose resume drops the history
// (a wrapper around the pinned CLI, first on PATH). `cast agents check`
// runs it through the canary and records resume as failed for its version,
// `cast agents` shows the matrix and the failure metric counts it, and a
// switch of a Claude session with history into that codex becomes a
// handoff to a new Codex session, whose turn runs, with a notice in the
// thread that says why.
func TestAgentsCheckTurnsSwitchIntoHandoff(t *testing.T) {
	t.Parallel()
	binDir := agenttest.DropResumeCodex(t, brokenCodex)
	r := newTurnRigBins(t, nil, map[string]string{"codex": filepath.Join(binDir, "codex")}, "claude", "codex")
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "remember CANARY-H1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)

	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"),
		env: []string{"CAST_ADDR=" + r.addr, "PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH")}}
	// Each check runs the CLI a few times: give it room on a loaded machine.
	check := func(c cli) (string, string, int) {
		return testharness.RunInput(t, c.env, nil, 3*time.Minute, c.bin, "agents", "check", "--agent", "codex")
	}
	out, errOut, code := check(c)
	if code != 1 || !strings.Contains(out, "resume") || !strings.Contains(out, "FAILED: the model got the new prompt without the history") {
		t.Fatalf("cast agents check: exit %d\n%s\n%s", code, out, errOut)
	}
	var matrix struct {
		Checks []*struct {
			Agent, Version, Capability, CheckedBy string
			Passed                                bool
		}
	}
	if err := json.Unmarshal([]byte(c.must("agents", "--json")), &matrix); err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, ch := range matrix.Checks {
		if ch.Agent == "codex" && ch.Version == brokenCodex && !ch.Passed {
			failed[ch.Capability] = true
		}
	}
	if !failed["resume"] || failed["write"] {
		t.Fatalf("recorded verdicts: %+v", matrix.Checks)
	}
	table := c.must("agents")
	if !strings.Contains(table, brokenCodex) || !strings.Contains(table, "FAILED") || !strings.Contains(table, "worker") {
		t.Fatalf("cast agents:\n%s", table)
	}
	// A user may run the checks and sees the verdicts; only recording is
	// refused, and said so.
	tok, err := r.c.Auth.CreateToken(ctx, &castv1.CreateTokenRequest{Name: "carol", Role: castv1.Role_ROLE_USER})
	if err != nil {
		t.Fatal(err)
	}
	user := cli{t: t, bin: c.bin, env: append(append([]string{}, c.env...), "CAST_TOKEN="+tok.Token)}
	out, errOut, code = check(user)
	if code != 1 || !strings.Contains(out, "FAILED: the model got the new prompt without the history") || !strings.Contains(errOut, "not recorded (recording needs an admin token)") {
		t.Fatalf("cast agents check as a user: exit %d\n%s\n%s", code, out, errOut)
	}
	if m := metricsBody(t, r); !strings.Contains(m, `cast_agent_canary_failures_total{agent="codex",capability="resume"} 1`) {
		t.Fatalf("failure metric missing:\n%s", grepLines(m, "cast_agent_canary"))
	}

	out, errOut, code = c.run("switch", sess.Id, "--agent", "codex")
	if code != 0 {
		t.Fatalf("cast switch: exit %d: %s", code, errOut)
	}
	newID := strings.TrimSpace(out)
	if newID == sess.Id || !strings.Contains(errOut, "handed off to a new session "+newID) ||
		!strings.Contains(errOut, "Codex "+brokenCodex+" on node worker failed cast's resume check") {
		t.Fatalf("switch did not become a handoff with the reason:\nstdout %s\nstderr %s", out, errOut)
	}
	src, err := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
	if err != nil || src.Agent != "claude" {
		t.Fatalf("the source changed agent: %v %v", src, err)
	}
	var notice *castv1.Message
	for _, m := range r.messages(sess.Id) {
		if m.NoticeType == "handoff" {
			notice = m
		}
	}
	if notice == nil || !strings.Contains(notice.Text, "A switch to Codex would lose the history") || !strings.Contains(notice.Text, newID) {
		t.Fatalf("handoff notice: %v", notice)
	}
	ho := r.waitState(newID, castv1.SessionState_SESSION_STATE_IDLE, 1)
	if ho.Agent != "codex" || ho.HandoffFrom != sess.Id {
		t.Fatalf("handoff session: %+v", ho)
	}
	answered := false
	for _, m := range r.messages(newID) {
		answered = answered || (m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && m.Agent == "codex")
	}
	if !answered {
		t.Fatal("the handoff's first turn did not answer")
	}
}

// TestNodeChecksAgentsOnStart: a node started with agent checks canaries
// the agent versions nobody has checked and records the verdicts as
// itself, and checks again when the CLI is updated under it.
func TestNodeChecksAgentsOnStart(t *testing.T) {
	t.Parallel()
	binDir := agenttest.DropResumeCodex(t, brokenCodex)
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	testharness.StartNode(t, srv.Addr(), "checker", func(cfg *node.Config) {
		cfg.AgentChecks = true
		cfg.ReadinessInterval = 100 * time.Millisecond
		cfg.Agents["codex"] = node.AgentSetup{Bin: filepath.Join(binDir, "codex")}
	})
	var got []*castv1.AgentCheck
	testharness.WaitFor(t, 2*time.Minute, "the node's codex verdicts", func() bool {
		resp, err := c.Agents.ListAgentChecks(context.Background(), &castv1.ListAgentChecksRequest{Agent: "codex"})
		if err != nil {
			return false
		}
		got = resp.Checks
		return len(got) > 0
	})
	resumeFailed := false
	for _, ch := range got {
		if ch.Version != brokenCodex || ch.CheckedBy != "checker" {
			t.Errorf("verdict %+v: want version %s checked by the node", ch, brokenCodex)
		}
		if ch.Capability == "resume" && !ch.Passed {
			resumeFailed = true
		}
	}
	if !resumeFailed {
		t.Fatalf("resume not failed: %+v", got)
	}

	// An update of the CLI (its package.json says so) is checked too.
	const next = "0.172.1-nohistory"
	pkg := filepath.Join(binDir, "..", "@openai", "codex", "package.json")
	if err := os.WriteFile(pkg, []byte(`{"name":"@openai/codex","version":"`+next+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	testharness.WaitFor(t, 2*time.Minute, "verdicts for the updated codex", func() bool {
		resp, err := c.Agents.ListAgentChecks(context.Background(), &castv1.ListAgentChecksRequest{Agent: "codex"})
		if err != nil {
			return false
		}
		for _, ch := range resp.Checks {
			if ch.Version == next && ch.Capability == "resume" && !ch.Passed && ch.CheckedBy == "checker" {
				return true
			}
		}
		return false
	})
}

func metricsBody(t *testing.T, r *turnRig) string {
	t.Helper()
	resp, err := http.Get("http://" + r.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
