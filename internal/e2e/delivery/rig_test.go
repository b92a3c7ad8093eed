package delivery

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
	"github.com/cast-dev/cast/internal/agents/sandbox"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/deliverycheck"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
)

// agentNames are the agents a session switches between: every agent
// with a real CLI.
var agentNames = []string{"claude", "codex", "gemini", "pi", "opencode"}

// rig is a control plane process (embedded etcd, kill -9 and restart on
// the same data dir and port), two node processes running the real CLIs,
// and one fake model per agent, so each request names its agent.
type rig struct {
	t            *testing.T
	seed         uint64
	steps, batch int // the run's size, for the replay line
	rec          *recorder
	cp           *testharness.ControlPlaneProc
	c            *client.Client
	nodes        []*testharness.NodeProc
	models       map[string]string // agent -> the --model its sessions need ("" for its default)
	sessions     []*session
	uses         map[string]int // agent -> sessions created on or switched to it
	cwd          string
	// keepGoing reports violations and runs on (CAST_DELIVERY_KEEP_GOING),
	// reporting each once.
	keepGoing bool
	reported  map[string]bool
	// logDir keeps every process's output (CAST_DELIVERY_LOGS), to see
	// where a passing run's time went.
	logDir string
	// happened counts the signal faults as they landed (a CLI kill with
	// no CLI running is a no-op), so a run shows it met them.
	happened map[string]int
}

// session is the driver's view of one session.
type session struct {
	tag, id string
	agent   string // as the store said last
	sent    int    // messages sent (the next mark's index)
	lastSeq int64  // the newest acknowledged message's seq
}

func newRig(t *testing.T, seed uint64, steps, batch int) *rig {
	r := &rig{t: t, seed: seed, steps: steps, batch: batch, rec: newRecorder(), models: map[string]string{}, uses: map[string]int{}, cwd: t.TempDir(),
		keepGoing: os.Getenv("CAST_DELIVERY_KEEP_GOING") != "", reported: map[string]bool{}, logDir: os.Getenv("CAST_DELIVERY_LOGS"),
		happened: map[string]int{}}
	if r.logDir != "" { // the step log as it goes, for a long run
		f, err := os.Create(filepath.Join(r.logDir, fmt.Sprintf("seed%d-steps.log", seed)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		r.rec.live = f
	}
	fakes := map[string]*fakemodel.Server{}
	for _, a := range agentNames {
		fakes[a] = fakemodel.Start(t)
		fakes[a].SetPolicy(r.rec.policy(a))
		sb, err := sandbox.Setup(a, t.TempDir(), fakes[a].URL)
		if err != nil {
			t.Fatal(err)
		}
		r.models[a] = sb.Model
	}
	// OpenCode's sessions name the provider/model its config names anyway:
	// with none, each native rebuild first asks the CLI for its default
	// (opencode debug config, one more start of a CLI that costs about 5
	// CPU-seconds).
	r.models["opencode"] = sandbox.FakeProvider + "/" + sandbox.FakeModel
	r.cp = testharness.StartControlPlaneProc(t)
	r.c = testharness.Dial(t, r.cp.Addr)
	for _, name := range []string{"n1", "n2"} {
		n := testharness.NewNodeProc(t, r.cp.Addr, name, "--agents-config", agentsConfig(t, fakes), "--log-level", "debug")
		n.Start(r.c)
		r.nodes = append(r.nodes, n)
	}
	t.Cleanup(func() {
		r.keepLog("controlplane", r.cp.Proc)
		for _, n := range r.nodes {
			r.keepLog(n.Name, n.Proc)
		}
	})
	return r
}

// keepLog appends what p printed to name's file in logDir (when set): a
// process's output is kept until it is started again.
func (r *rig) keepLog(name string, p *testharness.Proc) {
	if r.logDir == "" || p == nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(r.logDir, fmt.Sprintf("seed%d-%s.log", r.seed, name)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		r.t.Logf("keep %s's log: %v", name, err)
		return
	}
	defer f.Close()
	_, _ = f.WriteString(p.Output())
}

// agentsConfig writes a node's agents config: every agent's real CLI in
// a HOME of its own (per node, as on two machines) talking to its fake.
func agentsConfig(t *testing.T, fakes map[string]*fakemodel.Server) string {
	setups := map[string]map[string]any{}
	for _, a := range agentNames {
		home, env := agenttest.NodeEnv(t, a, fakes[a].URL)
		setups[a] = map[string]any{"bin": agenttest.Bin(t, a), "home": home, "env": env}
	}
	path := filepath.Join(t.TempDir(), "agents.json")
	b, _ := json.Marshal(setups)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// fatalf ends the run with the seed, the step log and why.
func (r *rig) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed %d: %s\nreplay: CAST_DELIVERY_SEED=%d CAST_DELIVERY_STEPS=%d CAST_DELIVERY_BATCH=%d go test -run TestDeliveryRule ./internal/e2e/delivery/\nsteps:\n%s",
		r.seed, fmt.Sprintf(format, args...), r.seed, r.steps, r.batch, r.rec.stepLog())
}

// retry runs call until it succeeds or within passes (each attempt gets
// 10s), and ends the run if it never does: calls that carry a request id
// are stored once however often they are sent, and the control plane may
// be restarting.
func (r *rig) retry(what string, within time.Duration, call func(ctx context.Context) error) {
	r.t.Helper()
	if err := retryErr(what, within, call); err != nil {
		r.fatalf("%v", err)
	}
}

// retryErr is retry returning the last error instead.
func retryErr(what string, within time.Duration, call func(ctx context.Context) error) error {
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := call(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no answer within %s: %w", what, within, err)
		}
		time.Sleep(500 * time.Millisecond) // backoff between attempts
	}
}

func (r *rig) get(s *session) *castv1.Session {
	r.t.Helper()
	var got *castv1.Session
	r.retry("get session "+s.tag, time.Minute, func(ctx context.Context) error {
		var err error
		got, err = r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: s.id})
		return err
	})
	s.agent = got.Agent
	return got
}

// create starts a root session on agent and node with its first message.
func (r *rig) create(agent, node string) *session {
	r.t.Helper()
	s := &session{tag: fmt.Sprintf("s%d", len(r.sessions)+1), agent: agent, sent: 1}
	mark := deliverycheck.Mark(s.tag, 1)
	var got *castv1.Session
	r.retry("create "+s.tag, 2*time.Minute, func(ctx context.Context) error {
		var err error
		got, err = r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: agent, Model: r.models[agent], Node: node,
			Cwd: r.cwd, Text: mark + " hello", RequestId: "create-" + s.tag})
		return err
	})
	s.id, s.lastSeq = got.Id, got.LastSeq
	r.sessions = append(r.sessions, s)
	r.uses[agent]++
	r.rec.update(func(h *deliverycheck.History) {
		h.Sessions = append(h.Sessions, deliverycheck.Session{ID: s.tag})
		h.Messages = append(h.Messages, deliverycheck.Message{Session: s.tag, Seq: got.LastSeq, Mark: mark, At: r.rec.tick()})
	})
	r.rec.logf("create %s = %s on %s/%s: %s seq %d", s.tag, s.id, agent, node, mark, got.LastSeq)
	return s
}

// send sends s its next message (TOOLCALL asks for a tool call) and
// records it once the store acknowledged it.
func (r *rig) send(s *session, tool bool, why string) {
	r.t.Helper()
	if err := r.trySend(s, tool, why); err != nil {
		r.fatalf("%v", err)
	}
}

// trySend is send returning an error instead of ending the run (for a
// send under way in another goroutine).
func (r *rig) trySend(s *session, tool bool, why string) error {
	s.sent++
	mark := deliverycheck.Mark(s.tag, s.sent)
	text := mark + " next"
	if tool {
		text = mark + " TOOLCALL please"
	}
	var resp *castv1.SendMessageResponse
	err := retryErr("send "+mark, 2*time.Minute, func(ctx context.Context) error {
		var err error
		resp, err = r.c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: s.id, Text: text, RequestId: "send-" + mark})
		return err
	})
	if err != nil {
		return err
	}
	seq := resp.Message.Seq
	s.lastSeq = max(s.lastSeq, seq)
	r.rec.update(func(h *deliverycheck.History) {
		h.Messages = append(h.Messages, deliverycheck.Message{Session: s.tag, Seq: seq, Mark: mark, At: r.rec.tick()})
	})
	r.rec.logf("  send %s %s seq %d (%s)", s.tag, mark, seq, why)
	return nil
}

// otherNode is the node s is not on.
func (r *rig) otherNode(s *castv1.Session) string {
	if s.Node == r.nodes[0].Name {
		return r.nodes[1].Name
	}
	return r.nodes[0].Name
}

// leastUsed is the agent other than not used least so far, ties broken
// by k: every agent gets sessions early in a run.
func (r *rig) leastUsed(not string, k uint64) string {
	var best []string
	for _, a := range agentNames {
		switch {
		case a == not:
		case len(best) == 0 || r.uses[a] < r.uses[best[0]]:
			best = []string{a}
		case r.uses[a] == r.uses[best[0]]:
			best = append(best, a)
		}
	}
	return best[k%uint64(len(best))]
}

// undelivered reads every session's undelivered notices into the history.
func (r *rig) undelivered() {
	r.t.Helper()
	for _, s := range r.sessions {
		var found []deliverycheck.Undelivered
		r.retry("read "+s.tag, time.Minute, func(ctx context.Context) error {
			found = nil
			return r.c.EachMessage(ctx, 0, &castv1.ListMessagesRequest{SessionId: s.id}, func(m *castv1.Message) error {
				var u deliverycheck.Undelivered
				if m.NoticeType == transcript.NoticeUndelivered {
					if _, err := fmt.Sscanf(strings.TrimPrefix(m.ClientId, "undelivered."), "%d-%d", &u.From, &u.To); err == nil {
						u.Session = s.tag
						found = append(found, u)
					}
				}
				return nil
			})
		})
		r.rec.update(func(h *deliverycheck.History) {
			h.Undelivered = append(deleteSession(h.Undelivered, s.tag), found...)
		})
	}
}

func deleteSession(us []deliverycheck.Undelivered, tag string) []deliverycheck.Undelivered {
	var out []deliverycheck.Undelivered
	for _, u := range us {
		if u.Session != tag {
			out = append(out, u)
		}
	}
	return out
}
