package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/moves"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
)

// pointHold holds the control plane's goroutine that reaches a named
// failpoint (Config.Failpoint) until the test lets it go: the test acts
// exactly between the two steps the point separates.
type pointHold struct {
	mu      sync.Mutex
	name    string
	reached chan struct{}
	release chan struct{}
}

// hook is the control plane's Config.Failpoint.
func (h *pointHold) hook(name string) {
	h.mu.Lock()
	if name != h.name || h.reached == nil {
		h.mu.Unlock()
		return
	}
	reached, release := h.reached, h.release
	h.reached = nil // once
	h.mu.Unlock()
	close(reached)
	<-release
}

// arm makes the next arrival at name wait; wait blocks until it is there,
// and let lets it go on (at most once; also at the test's end).
func (h *pointHold) arm(t *testing.T, name string) (wait func(), let func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	reached, release := make(chan struct{}), make(chan struct{})
	h.name, h.reached, h.release = name, reached, release
	var once sync.Once
	let = func() { once.Do(func() { close(release) }) }
	t.Cleanup(let)
	return func() {
		t.Helper()
		select {
		case <-reached:
		case <-time.After(2 * time.Minute):
			t.Fatalf("the control plane never reached %s", name)
		}
	}, let
}

// switchAsync starts a switch of id to agent; the returned func waits for
// its answer.
func (r *turnRig) switchAsync(id, agent string) func() error {
	done := make(chan error, 1)
	go func() {
		_, err := r.c.Sessions.SwitchSession(context.Background(), &castv1.SwitchSessionRequest{SessionId: id, Agent: agent})
		done <- err
	}()
	return func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("the switch to %s did not answer", agent)
		}
	}
}

// noOldAgentAfterSwitch fails when an assistant message of another agent
// than to follows the last agent-switch divider in msgs.
func noOldAgentAfterSwitch(t *testing.T, msgs []*castv1.Message, to string) {
	t.Helper()
	last := -1
	for i, msg := range msgs {
		if msg.Kind == castv1.MessageKind_MESSAGE_KIND_NOTICE && msg.NoticeType == transcript.NoticeAgentSwitch {
			last = i
		}
	}
	if last < 0 {
		t.Fatalf("no switch to %s in the session", to)
	}
	for _, msg := range msgs[last+1:] {
		if msg.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && msg.Agent != to {
			t.Fatalf("#%d %q written by %s after the switch to %s", msg.Seq, clipItems(msg.Text), msg.Agent, to)
		}
	}
}

// answeredOn fails unless an assistant message of agent follows seq.
func answeredOn(t *testing.T, msgs []*castv1.Message, seq int64, agent string) {
	t.Helper()
	if !slices.ContainsFunc(msgs, func(msg *castv1.Message) bool {
		return msg.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && msg.Seq > seq && msg.Agent == agent
	}) {
		t.Fatalf("#%d was not answered on %s", seq, agent)
	}
}

// Seams of the moves no other test combines with messages in flight.
//
// A user message acknowledged while a switch is between its read of the
// session and its write of the new agent (the control plane held at
// moves.FailSwitchBeforeWrite): the switch did not see it, nor the turn
// it starts. Three orders of the store's writes: the turn's start lands
// after the switch (the node held at node.turn-start), before it, and
// before it while the switch stops another turn it saw running. Each
// time the old agent's turn for the message is refused or stopped, never
// answers under the divider, and the new agent's requests hold every
// message once, in order.
//
// Switches with real CLIs on either side: into OpenCode while claude's
// turn runs with a message queued, and out of it (to codex) while its own
// turn runs with one queued; gemini to pi while the queued message's turn
// is about to start (the node held at node.turn-start); claude to codex
// to pi, the second switch made while the turn the first stopped has not
// ended (the node held at node.turn-before-outcome) with two messages
// queued; and a fork (onto the session's agent, and onto the agent it
// left) right after such a switch. Each queued message runs once, on the
// new agent, in order; the agent left never answers after the divider.
//
// `cast handoff` onto codex while the source's turn runs with messages
// queued behind it, and while the source is parked holding its prompt:
// the source runs its messages once each, in order, on its own agent,
// and the new session's first request holds the brief (which quotes
// what the source was asked and had not answered) once, each message
// quoted at most once, in order.
func TestDeliveryAtMoreSeams(t *testing.T) {
	t.Parallel()
	hold := &pointHold{}
	r := newTurnRigWith(t, func(cfg *controlplane.Config, _ string) { cfg.Failpoint = hold.hook }, "claude", "codex", "pi", "gemini", "opencode")
	run := func(name string, f func(t *testing.T, m func(int) string)) {
		t.Run(name, func(t *testing.T) {
			f(t, func(n int) string { return fmt.Sprintf("GAP-%s-%d.", name, n) })
		})
	}

	// The node records the message's turn start only after the switch's
	// write: the store refuses it (AGENT_SWITCHED) and the new agent
	// runs the message.
	run("switchgap-start-after", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		r.node.Kill()
		r.startNodeEnv("CAST_FAILPOINTS=node.turn-start:stop")
		t.Cleanup(func() { r.node.Signal(syscall.SIGCONT) }) // a stopped node would not stop
		wait, let := hold.arm(t, moves.FailSwitchBeforeWrite)
		switched := r.switchAsync(id, "codex")
		wait()
		n := len(r.fake.Turns())
		s2 := r.send(id, dmsg(m(2)))
		testharness.WaitFor(t, 2*time.Minute, "the node held before the turn's start is recorded", func() bool {
			out := r.node.Output()
			return strings.Contains(out, "failpoint reached; stopping") && strings.Contains(out, "node.turn-start")
		})
		let()
		must(t, switched())
		r.node.Signal(syscall.SIGCONT)
		r.waitDelivered(id, "the message sent in the gap answered", s2)
		for _, req := range r.fake.Turns()[n:] {
			if req.API == fakemodel.Anthropic {
				t.Fatalf("claude made a request after the switch to codex:\n%s", clipItems(fmtItems(req.Items)))
			}
		}
		assertDeliveredOnce(t, requestWith(t, r.fake, m(2)), m(1), m(2))
		r.nextOnCodexHoldsAll(t, id, m, 3)
		r.node.Kill()
		r.startNode()
	})

	// The turn's start lands before the switch's write: the switch
	// stops it (it ran the old agent), and the new agent's next request
	// holds the message once.
	run("switchgap-start-before", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		wait, let := hold.arm(t, moves.FailSwitchBeforeWrite)
		switched := r.switchAsync(id, "codex")
		wait()
		s2, release := r.sendHeld(id, dmsg(m(2)))
		let()
		must(t, switched())
		r.waitStopped(id, s2)
		release()
		r.nextOnCodexHoldsAll(t, id, m, 3)
	})

	// A turn runs as the switch reads the session (it sends the
	// interrupt); the message sent in the gap starts another turn on the
	// old agent, recorded before the switch's write. That turn is
	// stopped too.
	run("switchgap-second-turn", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		_, release2 := r.sendHeld(id, dmsg(m(2)))
		wait, let := hold.arm(t, moves.FailSwitchBeforeWrite)
		switched := r.switchAsync(id, "codex")
		wait()
		s3, release3 := r.sendHeld(id, dmsg(m(3)))
		let()
		must(t, switched())
		r.waitStopped(id, s3)
		release2()
		release3()
		r.nextOnCodexHoldsAll(t, id, m, 4)
	})

	// A switch into OpenCode while claude's turn runs with a message
	// queued behind it, then out of OpenCode (to codex) while its own
	// turn runs with a message queued: each queued message runs once on
	// the new agent, in order, and the agent left never answers after
	// the divider.
	run("switch-opencode", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		r.switchWithQueued(t, id, "opencode", m, 2)
		if req := r.switchWithQueued(t, id, "codex", m, 4); req.API != fakemodel.Responses {
			t.Fatalf("the message queued at the switch to codex ran on %s", req.API)
		}
	})

	// A switch from gemini to pi while the queued message's gemini turn
	// is about to start (the node held at node.turn-start): pi answers
	// it, once, and gemini never does.
	run("switch-gemini-pi-at-start", func(t *testing.T, m func(int) string) {
		id := r.create("gemini", dmsg(m(1)))
		r.stopAtNextTurnStart()
		n := len(r.fake.Turns())
		s2 := r.send(id, dmsg(m(2)))
		r.waitStoppedAtTurnStart("the queued gemini turn held before its start is recorded")
		r.switchTo(id, "pi")
		r.node.Signal(syscall.SIGCONT)
		r.waitDelivered(id, "the queued message's turn over", s2)
		for _, req := range r.fake.Turns()[n:] {
			if req.API == fakemodel.Gemini {
				t.Fatalf("gemini made a request after the switch to pi:\n%s", clipItems(fmtItems(req.Items)))
			}
		}
		noOldAgentAfterSwitch(t, r.messages(id), "pi")
		answeredOn(t, r.messages(id), s2, "pi")
		assertDeliveredOnce(t, requestWith(t, r.fake, m(2)), m(1), m(2))
		r.node.Kill()
		r.startNode()
	})

	// Two switches in a row (claude to codex to pi) while claude's turn
	// runs with two messages queued behind it, the second made while
	// the turn the first stopped has not ended (the node held at
	// node.turn-before-outcome): codex never runs, pi runs the queued
	// messages once each, in order.
	run("switch-twice", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		r.stopAtTurnEnd()
		n := len(r.fake.Turns())
		_, release := r.sendHeld(id, dmsg(m(2)))
		r.send(id, dmsg(m(3)))
		s4 := r.send(id, dmsg(m(4)))
		r.switchTo(id, "codex")
		r.waitStoppedAt("node.turn-before-outcome", "the stopped claude turn held before its end is recorded")
		r.switchTo(id, "pi")
		r.node.Signal(syscall.SIGCONT)
		release()
		r.waitDelivered(id, "the queued messages answered", s4)
		for _, req := range r.fake.Turns()[n+1:] {
			if req.API != fakemodel.Chat {
				t.Fatalf("a %s request after the switches to codex and pi:\n%s", req.API, clipItems(fmtItems(req.Items)))
			}
		}
		noOldAgentAfterSwitch(t, r.messages(id), "pi")
		answeredOn(t, r.messages(id), s4, "pi")
		assertDeliveredOnce(t, requestWith(t, r.fake, m(4)), m(1), m(2), m(3), m(4))
		s5 := r.send(id, dmsg(m(5)))
		r.waitDelivered(id, "the next message answered", s5)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(5)), m(1), m(2), m(3), m(4), m(5))
		r.node.Kill()
		r.startNode()
	})

	// A fork of a session right after a switch (claude to codex) whose
	// stopped turn has not ended (the node held at
	// node.turn-before-outcome), with a message queued behind that turn,
	// onto the session's agent (codex) and onto the agent it left: the
	// fork's first request holds every message once, in order; the
	// parent's queued message runs on codex once.
	for _, to := range []string{"", "claude"} {
		run("fork-after-switch-"+cmp.Or(to, "codex"), func(t *testing.T, m func(int) string) {
			id := r.create("claude", dmsg(m(1)))
			r.stopAtTurnEnd()
			_, release := r.sendHeld(id, dmsg(m(2)))
			s3 := r.send(id, dmsg(m(3)))
			r.switchTo(id, "codex")
			r.waitStoppedAt("node.turn-before-outcome", "the stopped claude turn held before its end is recorded")
			fork, err := r.c.Sessions.ForkSession(context.Background(), &castv1.ForkSessionRequest{SessionId: id, Agent: to})
			must(t, err)
			r.node.Signal(syscall.SIGCONT)
			release()
			if want := cmp.Or(to, "codex"); fork.Agent != want {
				t.Errorf("the fork onto %q after the switch to codex runs %s", to, fork.Agent)
			}
			r.waitDelivered(id, "the parent's queued message answered", s3)
			noOldAgentAfterSwitch(t, r.messages(id), "codex")
			answeredOn(t, r.messages(id), s3, "codex")
			assertDeliveredOnce(t, requestWith(t, r.fake, m(3)), m(1), m(2), m(3))
			f := r.send(fork.Id, dmsg(m(10)))
			r.waitDelivered(fork.Id, "the fork's message answered", f)
			assertDeliveredOnce(t, requestWith(t, r.fake, m(10)), m(1), m(2), m(3), m(10))
			r.node.Kill()
			r.startNode()
		})
	}

	// The source's turn runs (the model holds it) with two messages
	// queued behind it.
	run("handoff-running-queued", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		_, release := r.sendHeld(id, dmsg(m(2)))
		r.send(id, dmsg(m(3)))
		s4 := r.send(id, dmsg(m(4)))
		assertDeliveredOnce(t, r.handoff(t, id, "codex"), m(2), m(3), m(4))
		release()
		r.waitDelivered(id, "the source's queued messages answered", s4)
		req := requestWith(t, r.fake, m(4))
		if req.API != fakemodel.Anthropic {
			t.Fatalf("the source's queued messages ran on %s, not claude", req.API)
		}
		assertDeliveredOnce(t, req, m(1), m(2), m(3), m(4))
	})

	// The source parked on a usage limit, holding its prompt.
	run("handoff-parked", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		r.fake.FailNext(1, 429)
		s2 := r.send(id, dmsg(m(2)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_PARKED, s2-1)
		assertDeliveredOnce(t, r.handoff(t, id, "codex"), m(2))
		s3 := r.send(id, dmsg(m(3)))
		r.waitDelivered(id, "the held prompt and the next one answered", s3)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(3)), m(1), m(2), m(3))
	})
}

// switchWithQueued switches id to agent while its turn for m(k) runs (the
// model holds it) with m(k+1) queued behind it, checks that agent answers
// m(k+1), the agent left not after the divider, and returns the request
// of m(k+1)'s turn, checked to hold m(1) .. m(k+1) once each, in order.
func (r *turnRig) switchWithQueued(t *testing.T, id, agent string, m func(int) string, k int) fakemodel.Request {
	t.Helper()
	_, release := r.sendHeld(id, dmsg(m(k)))
	queued := r.send(id, dmsg(m(k+1)))
	r.switchTo(id, agent)
	release()
	r.waitDelivered(id, "the message queued at the switch to "+agent+" answered", queued)
	noOldAgentAfterSwitch(t, r.messages(id), agent)
	answeredOn(t, r.messages(id), queued, agent)
	req := requestWith(t, r.fake, m(k+1))
	assertDeliveredOnce(t, req, marksUpTo(m, k+1)...)
	return req
}

// waitStopped waits until the session's turn for seq (held at the model)
// has stopped: the session idle with seq stored. A turn the switch did
// not stop would hold there until the test let the model answer.
func (r *turnRig) waitStopped(id string, seq int64) {
	r.t.Helper()
	testharness.WaitFor(r.t, 90*time.Second, fmt.Sprintf("the turn of #%d stopped", seq), func() bool {
		s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
		return err == nil && s.State == castv1.SessionState_SESSION_STATE_IDLE && s.LastSeq >= seq
	})
}

// nextOnCodexHoldsAll sends m(k) to a session switched from claude to
// codex and checks its turn: no claude answer after the switch, and
// codex's request holds m(1) .. m(k) once each, in order.
func (r *turnRig) nextOnCodexHoldsAll(t *testing.T, id string, m func(int) string, k int) {
	t.Helper()
	seq := r.send(id, dmsg(m(k)))
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	noOldAgentAfterSwitch(t, r.messages(id), "codex")
	req := requestWith(t, r.fake, m(k))
	if req.API == fakemodel.Anthropic {
		t.Fatal("the message after the switch ran on claude")
	}
	assertDeliveredOnce(t, req, marksUpTo(m, k)...)
}

// handoff runs `cast handoff` of src onto agent, waits until the new
// session's first turn is done and returns the model request that turn
// made with the brief.
func (r *turnRig) handoff(t *testing.T, src, agent string) fakemodel.Request {
	t.Helper()
	out, errOut, code := r.cast("", "handoff", "-s", src, "--agent", agent, "-m", "carry on", "--json")
	if code != 0 {
		t.Fatalf("cast handoff: exit %d: %s%s", code, out, errOut)
	}
	var res struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.ID == "" {
		t.Fatalf("cast handoff --json: %v\n%s", err, out)
	}
	r.waitState(res.ID, castv1.SessionState_SESSION_STATE_IDLE, 1)
	return requestWith(t, r.fake, "You are taking over session "+src)
}

// A migration to another node right after a switch from claude to codex,
// with a message queued behind the turn the switch stopped: the queued
// message runs on codex once, on laptop before the move or on linux
// after it, and codex's next request on linux holds every message once,
// in order. Then the same with the queued message's codex turn held at
// the model as the move starts: the move stops it (--wait 1s) and it
// runs again on linux.
func TestDeliveryAtAMoveAfterASwitch(t *testing.T) {
	t.Parallel()
	r := newMigRig(t, migOpts{}, "claude", "codex")
	for _, held := range []bool{false, true} {
		name := map[bool]string{false: "queued", true: "stopped"}[held]
		t.Run(name, func(t *testing.T) { moveAfterSwitch(t, r, name, held) })
	}
}

// moveAfterSwitch is TestDeliveryAtAMoveAfterASwitch's case name (held:
// the queued message's codex turn held at the model as the move starts).
func moveAfterSwitch(t *testing.T, r *migRig, name string, held bool) {
	ctx := context.Background()
	m := func(n int) string { return fmt.Sprintf("MVSW-%s-%d.", name, n) }
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: r.repo("laptop", name), Node: "laptop", Text: dmsg(m(1))})
	must(t, err)
	id := sess.Id
	r.waitAnswered(id, 1)
	gate2, gate3 := make(chan struct{}), make(chan struct{})
	r.fake.Enqueue(fakemodel.Reply{Text: "held answer", Gate: gate2})
	if held {
		r.fake.Enqueue(fakemodel.Reply{Text: "codex held answer", Gate: gate3})
	}
	n := r.fake.TurnsStarted()
	r.send(id, dmsg(m(2)))
	testharness.WaitFor(t, 2*time.Minute, "claude's turn at the model", func() bool { return r.fake.TurnsStarted() > n })
	s3 := r.send(id, dmsg(m(3)))
	_, err = r.c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: id, Agent: "codex"})
	must(t, err)
	close(gate2) // its CLI was stopped
	if held {
		testharness.WaitFor(t, 2*time.Minute, "codex's turn at the model", func() bool { return r.fake.TurnsStarted() > n+1 })
	}
	mig, err := r.c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "linux", SessionIds: []string{id}, Wait: durationpb.New(time.Second)})
	must(t, err)
	if mig = r.waitMigration(mig.Id); mig.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		t.Fatalf("%s: migration %v (%s)", name, mig.State, mig.Reason)
	}
	close(gate3)
	s := r.waitAnswered(id, s3)
	if s.Node != "linux" || s.Agent != "codex" {
		t.Fatalf("%s: after the move the session runs %s on %s; want codex on linux", name, s.Agent, s.Node)
	}
	req := requestWith(t, r.fake, m(3))
	if req.API == fakemodel.Anthropic {
		t.Fatalf("%s: the queued message ran on claude after the switch", name)
	}
	assertDeliveredOnce(t, req, m(1), m(2), m(3))
	r.nextTurnHoldsOnce(id, m(4), m(1), m(2), m(3))
	if req := requestWith(t, r.fake, m(4)); req.API == fakemodel.Anthropic {
		t.Fatalf("%s: the message after the move ran on claude", name)
	}
	noOldAgentAfterSwitch(t, r.messages(id), "codex")
	r.assertAnswers(id, map[string]int{"codex held answer": 0})
}

// send sends text to session id and returns its seq.
func (r *migRig) send(id, text string) int64 {
	r.t.Helper()
	return sendText(r.t, r.c, id, text)
}

// A fleet account hits its usage limit mid-turn (the turn's tool ran, the
// model's next request refused with 429) with a message queued behind
// the turn: the turn parks, the fleet switches to the other account and
// the parked turn runs again there. The queued message reaches the model
// only on the new account, once, after the parked prompt; no request
// holds a message or the tool's output twice, and the next turn's
// request holds every message once, in order.
func TestDeliveryAtAFleetSwitchMidTurn(t *testing.T) {
	t.Parallel()
	r, _, _ := newFleetRigWith(t, func(c *controlplane.Config) { c.Fleet.Cooldown = time.Minute })
	m := func(n int) string { return fmt.Sprintf("FLEETQ-%d.", n) }
	id := r.create("claude", dmsg(m(1)))
	gate := make(chan struct{})
	r.fake.Enqueue(fakemodel.Reply{Shell: "echo FLEETQ-TOOL-OUTPUT", Gate: gate})
	n := r.fake.TurnsStarted()
	r.send(id, dmsg(m(2)))
	waitTurns(t, r.fake, n+1)
	s3 := r.send(id, dmsg(m(3)))
	r.fake.RejectCredential(fleetTokA, 429)
	close(gate)
	r.waitDelivered(id, "the parked turn and the queued message answered", s3)
	waitSwitchNotice(t, r, id, "Now using account work-b (was work-a")
	const out = "FLEETQ-TOOL-OUTPUT"
	limited := false // the limit hit after the tool ran
	for i, req := range r.fake.Turns()[n:] {
		tok := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
		user := userText(req)
		limited = limited || (tok == fleetTokA && req.Status == 429 && outputLines(user, out) > 0)
		if tok == fleetTokA && strings.Contains(user, m(3)) {
			t.Errorf("request %d (status %d) carried the queued message on the limited account", i, req.Status)
		}
		for _, mk := range []string{m(1), m(2), m(3)} {
			if c := strings.Count(user, mk); c > 1 {
				t.Errorf("request %d (status %d, account %s) holds %q %d times:\n%s", i, req.Status, tok, mk, c, clipItems(user))
			}
		}
		if c := outputLines(user, out); c > 1 {
			t.Errorf("request %d (status %d, account %s) holds the tool's output %d times:\n%s", i, req.Status, tok, c, clipItems(user))
		}
	}
	if !limited {
		t.Fatal("no request on account A after the tool ran was refused: the limit did not hit mid-turn")
	}
	req := requestWith(t, r.fake, m(3))
	if tok := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer "); tok != fleetTokB {
		t.Fatalf("the queued message ran with %q, want account B", tok)
	}
	assertDeliveredOnce(t, req, m(1), m(2), m(3))
	if c := outputLines(userText(req), out); c != 1 {
		t.Fatalf("the queued message's request holds the tool's output %d times, want once:\n%s", c, clipItems(userText(req)))
	}
	s4 := r.send(id, dmsg(m(4)))
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s4)
	assertDeliveredOnce(t, requestWith(t, r.fake, m(4)), m(1), m(2), m(3), m(4))
}

// marksUpTo is m(1) .. m(k).
func marksUpTo(m func(int) string, k int) []string {
	marks := make([]string, 0, k)
	for i := 1; i <= k; i++ {
		marks = append(marks, m(i))
	}
	return marks
}

// userText is req's user items and tool results, one after another.
func userText(req fakemodel.Request) string {
	var b strings.Builder
	for _, it := range req.Items {
		if it.Role == "user" || it.Role == "tool" {
			b.WriteString(it.Text + "\n")
		}
	}
	return b.String()
}

// outputLines counts the lines of text that are out, alone (a tool's
// output, not the command that printed it).
func outputLines(text, out string) int {
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == out {
			n++
		}
	}
	return n
}
