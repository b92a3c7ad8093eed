package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
)

// turnRig is a control plane and a real node process whose agents (the
// real CLIs) talk to one fake model.
type turnRig struct {
	t        testing.TB
	c        *client.Client
	fake     *fakemodel.Server
	addr     string
	node     *testharness.Proc
	nodeArgs []string
	dataDir  string              // the node's
	homes    map[string]string   // agent -> its HOME
	envs     map[string][]string // agent -> its CLI's environment (the node's agents config)
	// metricsAddr serves the control plane's /metrics; over HTTPS
	// trusting caFile when the control plane serves TLS ("": plaintext).
	metricsAddr, caFile string
	srv                 *controlplane.Server // to stop it (a test may start another on its dir)
}

func newTurnRig(t testing.TB, agentNames ...string) *turnRig {
	return newTurnRigWith(t, nil, agentNames...)
}

// newTurnRigWith lets cb change the control plane's config (it gets the
// fake model's URL).
func newTurnRigWith(t testing.TB, cb func(*controlplane.Config, string), agentNames ...string) *turnRig {
	return newTurnRigBins(t, cb, nil, agentNames...)
}

// newTurnRigBins is newTurnRigWith with some agents' CLIs at other paths
// (bins: agent -> path), such as a fake version wrapping the pinned one.
func newTurnRigBins(t testing.TB, cb func(*controlplane.Config, string), bins map[string]string, agentNames ...string) *turnRig {
	return startTurnRig(t, cb, bins, nil, nil, agentNames...)
}

// startTurnRig is newTurnRigBins with the node started with args and env
// added.
func startTurnRig(t testing.TB, cb func(*controlplane.Config, string), bins map[string]string, args, env []string, agentNames ...string) *turnRig {
	fake := fakemodel.Start(t)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		if cb != nil {
			cb(c, fake.URL)
		}
	})
	cfgPath, homes, envs := agentsConfigEnvs(t, fake.URL, bins, agentNames...)
	r := &turnRig{t: t, c: testharness.DialServer(t, srv), fake: fake, addr: srv.Addr(), srv: srv, homes: homes, envs: envs, dataDir: t.TempDir(), metricsAddr: srv.MetricsAddr(), caFile: srv.CAFile()}
	// The agents' homes are the test's own: fleet accounts may rewrite
	// their credential stores (--fleet-accounts).
	r.nodeArgs = []string{"--controlplane", srv.Addr(), "--data-dir", r.dataDir, "--name", "worker",
		"--agents-config", cfgPath, "--log-level", "debug", "--fleet-accounts"}
	if pin := srv.CAPin(); pin != "" {
		r.nodeArgs = append(r.nodeArgs, "--ca-pin", pin)
	}
	r.nodeArgs = append(r.nodeArgs, args...)
	r.startNodeEnv(env...)
	return r
}

// agentsConfig writes a node's --agents-config for agentNames: the real
// CLIs (bins: agent -> another path for some), each with its own HOME
// (homes: agent -> HOME) talking to the fake model at fakeURL; an agent
// with no installable CLI (cursor, muse, grok) at a path with no CLI, so
// its turns fail with "binary not found".
func agentsConfig(t testing.TB, fakeURL string, bins map[string]string, agentNames ...string) (string, map[string]string) {
	cfg, homes, _ := agentsConfigEnvs(t, fakeURL, bins, agentNames...)
	return cfg, homes
}

// agentsConfigEnvs is agentsConfig with each agent's environment too
// (agent -> env), to run its CLI directly as the node's user would.
func agentsConfigEnvs(t testing.TB, fakeURL string, bins map[string]string, agentNames ...string) (string, map[string]string, map[string][]string) {
	setups := map[string]map[string]any{}
	homes := map[string]string{}
	envs := map[string][]string{}
	for _, a := range agentNames {
		if _, ok := agenttest.Installable(a); !ok {
			setups[a] = map[string]any{"bin": filepath.Join(t.TempDir(), "no-cli", a)}
			continue
		}
		home, env := agenttest.NodeEnv(t, a, fakeURL)
		homes[a], envs[a] = home, env
		bin := bins[a]
		if bin == "" {
			bin = agenttest.Bin(t, a)
		}
		setups[a] = map[string]any{"bin": bin, "home": home, "env": env}
	}
	cfgPath := filepath.Join(t.TempDir(), "agents.json")
	b, _ := json.Marshal(setups)
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, homes, envs
}

// startNode starts the node process and waits until it is connected.
func (r *turnRig) startNode() { r.startNodeEnv() }

// startNodeEnv is startNode with env added (CAST_FAILPOINTS).
func (r *turnRig) startNodeEnv(env ...string) { r.startNodeOwned(r.t, env...) }

// startNodeOwned is startNodeEnv with the process owner's: its end kills
// it (a subtest restarting the node of a rig its parent made passes the
// parent, whose later subtests use that node).
func (r *turnRig) startNodeOwned(owner testing.TB, env ...string) {
	// A node killed just before may still show connected: wait for a
	// stream opened by this process (connect_time from now on; the
	// control plane runs on this machine's clock).
	started := time.Now()
	r.node = testharness.StartProcEnv(owner, env, filepath.Join(testharness.Binaries(r.t), "node"), r.nodeArgs...)
	testharness.WaitFor(r.t, 30*time.Second, "node connected", func() bool {
		return testharness.NodeConnectedSince(r.c, "worker", started)
	})
}

func (r *turnRig) send(id, text string) int64 {
	r.t.Helper()
	return sendText(r.t, r.c, id, text)
}

// sendText sends text to session id through c and returns its seq.
func sendText(t testing.TB, c *client.Client, id, text string) int64 {
	t.Helper()
	resp, err := c.Sessions.SendMessage(context.Background(), &castv1.SendMessageRequest{SessionId: id, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Message.Seq
}

// waitState waits until the session is in state with last_seq > after.
func (r *turnRig) waitState(id string, st castv1.SessionState, after int64) *castv1.Session {
	r.t.Helper()
	return waitSessionState(r.t, r.c, id, st, after)
}

// waitSessionState is waitState asking through c.
func waitSessionState(t testing.TB, c *client.Client, id string, st castv1.SessionState, after int64) *castv1.Session {
	t.Helper()
	var sess *castv1.Session
	// Six minutes: a real CLI's turn beside other real-CLI tests on two
	// loaded cores took over three (OpenCode); an idle machine takes seconds.
	testharness.WaitFor(t, 6*time.Minute, fmt.Sprintf("session %s %v after seq %d", id, st, after), func() bool {
		var err error
		sess, err = c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
		return err == nil && sess.State == st && sess.LastSeq > after
	})
	return sess
}

func (r *turnRig) messages(id string) []*castv1.Message {
	r.t.Helper()
	resp, err := r.c.Sessions.ListMessages(context.Background(), &castv1.ListMessagesRequest{SessionId: id})
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.Messages
}

func kinds(msgs []*castv1.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, strings.ToLower(strings.TrimPrefix(m.Kind.String(), "MESSAGE_KIND_")))
	}
	return strings.Join(out, ",")
}

// A real Claude Code turn on a real node process: the tool call and its
// result are synced into the neutral copy while the turn runs, the next
// message resumes the same native session, a refused prompt fails the turn
// with a notice and never wedges the session, a kill -9 of the node
// mid-turn neither loses nor duplicates anything, and an interrupt stops
// the turn.
func TestNodeRunsRealClaudeTurns(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	cwd := t.TempDir()
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: cwd, Text: "TOOLCALL CMD[echo cast-tool-ok] please"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	msgs := r.messages(sess.Id)
	if got := kinds(msgs); got != "user,tool_call,tool_result,assistant" {
		t.Fatalf("after the first turn: %s", got)
	}
	if !strings.Contains(msgs[2].ToolResult.GetOutput(), "cast-tool-ok") || msgs[3].Agent != "claude" {
		t.Fatalf("tool result %q, assistant by %q", msgs[2].ToolResult.GetOutput(), msgs[3].Agent)
	}

	// Second turn: the same native session, with the first turn in it.
	seq := r.send(sess.Id, "second question MARK-2")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns := r.fake.Turns()
	last := turns[len(turns)-1]
	assertItems(t, last.Items, "TOOLCALL", "cast-tool-ok", "MARK-2")

	// A refused prompt (the model's API says 400): FAILED with a reason and
	// a notice naming it; the next message runs without it (it never wedges
	// the session).
	r.fake.FailNext(1, 400)
	seq = r.send(sess.Id, "refused MARK-3")
	failed := r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_FAILED, seq-1)
	if failed.StateReason == "" {
		t.Fatal("failed without a reason")
	}
	assertUndelivered(t, r.messages(sess.Id), seq)
	seq = r.send(sess.Id, "retry MARK-4")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns = r.fake.Turns()
	assertItems(t, turns[len(turns)-1].Items, "MARK-2", "retry MARK-4")
	if n := strings.Count(fmt.Sprint(turns[len(turns)-1].Items), "MARK-3"); n != 0 {
		t.Fatalf("the refused prompt reached the model %d times in the next turn", n)
	}

	// A prompt that never reached the model (401: not logged in) is not
	// dropped: FAILED with what to run, no undelivered notice, and the next
	// message carries it, once.
	r.fake.FailNext(1, 401)
	seq = r.send(sess.Id, "logged out MARK-5")
	failed = r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_FAILED, seq-1)
	if !strings.Contains(failed.StateReason, "not logged in") {
		t.Fatalf("failed because %q, want the login advice", failed.StateReason)
	}
	seq = r.send(sess.Id, "after login MARK-5B")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns = r.fake.Turns()
	assertItems(t, turns[len(turns)-1].Items, "MARK-4", "after login MARK-5B")
	if n := strings.Count(fmt.Sprint(turns[len(turns)-1].Items), "logged out MARK-5"); n != 1 {
		t.Fatalf("the held prompt reached the model %d times in the next turn, want once", n)
	}
	for _, m := range r.messages(sess.Id) {
		if m.NoticeType == transcript.NoticeUndelivered && strings.Contains(m.Text, "not logged in") {
			t.Fatalf("a held prompt was reported undelivered: %q", m.Text)
		}
	}

	// A usage limit (429) parks the session instead of failing it.
	r.fake.FailNext(1, 429)
	seq = r.send(sess.Id, "limited MARK-L")
	parked := r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_PARKED, seq-1)
	if !strings.Contains(parked.StateReason, "rate limited") {
		t.Fatalf("parked because %q", parked.StateReason)
	}

	// kill -9 of the node mid-turn: the restarted node stops the orphaned
	// CLI and runs the turn again; nothing is lost or stored twice.
	// The slow reply goes to whichever run asks first: the one killed with
	// the node, or the rerun.
	r.fake.Enqueue(fakemodel.Reply{Text: "slow answer", Delay: 20 * time.Second})
	seq = r.send(sess.Id, "while the node dies MARK-6")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_RUNNING, seq-1)
	time.Sleep(2 * time.Second) // the CLI is up and waiting on the slow model
	r.node.Kill()
	r.startNode()
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	prompts, answers := 0, 0
	for _, m := range r.messages(sess.Id) {
		if m.Seq < seq {
			continue
		}
		switch {
		case m.Kind == castv1.MessageKind_MESSAGE_KIND_USER && strings.Contains(m.Text, "MARK-6"):
			prompts++
		case m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT:
			answers++
		}
	}
	if prompts != 1 || answers != 1 {
		t.Fatalf("after a node kill -9 mid-turn: %d prompts, %d answers; want 1 and 1", prompts, answers)
	}

	// Interrupt a turn stuck on a slow model.
	r.fake.Enqueue(fakemodel.Reply{Text: "too late", Delay: 2 * time.Minute})
	seq = r.send(sess.Id, "slow MARK-5")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_RUNNING, seq-1)
	start := time.Now()
	testharness.WaitFor(t, 30*time.Second, "interrupt delivered", func() bool {
		resp, err := r.c.Sessions.InterruptSession(ctx, &castv1.InterruptSessionRequest{SessionId: sess.Id})
		return err == nil && resp.Delivered
	})
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq-1)
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("interrupt took %s", d)
	}
}

func assertItems(t *testing.T, items []fakemodel.Item, marks ...string) {
	t.Helper()
	at := 0
	for _, it := range items {
		if at < len(marks) && strings.Contains(it.Text+" "+it.ToolInput, marks[at]) {
			at++
		}
	}
	if at < len(marks) {
		var b strings.Builder
		for _, it := range items {
			b.WriteString(it.String() + "\n")
		}
		t.Fatalf("the model did not receive %q in order; it got:\n%s", marks[at], b.String())
	}
}
