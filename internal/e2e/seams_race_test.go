package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// answersAfter is how many assistant messages of agent follow seq, up to
// the next user message.
func answersAfter(msgs []*castv1.Message, seq int64, agent string) int {
	n := 0
	for _, msg := range msgs {
		if msg.Seq <= seq {
			continue
		}
		if msg.Kind == castv1.MessageKind_MESSAGE_KIND_USER {
			break
		}
		if msg.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && msg.Agent == agent {
			n++
		}
	}
	return n
}

// heldText is req's user and system items (a notice cast wrote is a
// system item for some agents), one after another.
func heldText(req fakemodel.Request) string {
	var b strings.Builder
	for _, it := range req.Items {
		if it.Kind == fakemodel.KindText && (it.Role == "user" || it.Role == "system") {
			b.WriteString(it.Text + "\n")
		}
	}
	return b.String()
}

// assertHeldOnce is assertDeliveredOnce over heldText: each mark once,
// in order, in a user turn or in history cast wrote as a notice.
func assertHeldOnce(t *testing.T, req fakemodel.Request, marks ...string) {
	t.Helper()
	marksOnceIn(t, string(req.API)+" request's user and system items", heldText(req), marks...)
}

// Seams where two things meet on one node's session.
//
// `cast interrupt` as the turn ends by itself: the CLI has exited and the
// turn's rows are stored, the outcome not yet recorded (the node held at
// node.turn-before-outcome) when the interrupt comes, a message queued
// behind the turn. The session ends idle, the turn, the queued message
// and the next one are each answered once, and the next request holds
// every message once, in order.
//
// A message sent while the owner node is down (kill -9), then a switch,
// then the node back: the new agent answers it once, the old never.
//
// A user message with an image, a Codex compaction, a fork onto claude
// and a switch of the fork back to codex (see the subtest).
func TestDeliveryAtRacingSeams(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "codex")
	run := func(name string, f func(t *testing.T, m func(int) string)) {
		t.Run(name, func(t *testing.T) {
			f(t, func(n int) string { return fmt.Sprintf("RACE-%s-%d.", name, n) })
		})
	}
	// The interrupt comes as the turn ends, a message queued behind it.
	run("interrupt-at-end-queued", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		r.stopAtTurnEnd()
		s2 := r.send(id, dmsg(m(2)))
		r.waitStoppedAt("node.turn-before-outcome", "the turn held after its CLI ended")
		s3 := r.send(id, dmsg(m(3)))
		_, err := r.c.Sessions.InterruptSession(context.Background(), &castv1.InterruptSessionRequest{SessionId: id})
		must(t, err)
		r.node.Signal(syscall.SIGCONT)
		r.waitDelivered(id, "the turns recorded", s3)
		s4 := r.send(id, dmsg(m(4)))
		r.waitDelivered(id, "the next message answered", s4)
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s4)
		msgs := r.messages(id)
		if n := answersAfter(msgs, s2, "claude"); n != 1 {
			t.Fatalf("%d answers to the turn that ended by itself, want 1", n)
		}
		if n := answersAfter(msgs, s3, "claude"); n != 1 {
			t.Errorf("%d answers to the message queued before the interrupt, want 1 (the interrupt was for the turn before)", n)
		}
		if n := answersAfter(msgs, s4, "claude"); n != 1 {
			t.Fatalf("%d answers to the message after the interrupt, want 1", n)
		}
		assertDeliveredOnce(t, requestWith(t, r.fake, m(4)), m(1), m(2), m(3), m(4))
		r.node.Kill()
		r.startNode()
	})

	// A message sent while the node is down, then a switch.
	run("down-send-switch", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		r.node.Kill()
		n := len(r.fake.Turns())
		s2 := r.send(id, dmsg(m(2)))
		r.switchTo(id, "codex")
		r.startNode()
		r.waitDelivered(id, "the message sent while the node was down answered", s2)
		for _, req := range r.fake.Turns()[n:] {
			if req.API == fakemodel.Anthropic {
				t.Fatalf("claude made a request after the switch to codex:\n%s", clipItems(fmtItems(req.Items)))
			}
		}
		msgs := r.messages(id)
		noOldAgentAfterSwitch(t, msgs, "codex")
		if n := answersAfter(msgs, s2, "codex"); n != 1 {
			t.Fatalf("%d codex answers to the message sent while the node was down, want 1", n)
		}
		assertDeliveredOnce(t, requestWith(t, r.fake, m(2)), m(1), m(2))
		r.nextOnCodexHoldsAll(t, id, m, 3)
	})

	// An imported user message with an image, a Codex compaction, then a
	// fork onto claude and a switch of the fork back to codex: each of
	// the fork's requests holds every message once, in order (a rebuilt
	// Codex session holds the messages the summary kept in its notice,
	// a developer message), the summary at most once and the image no
	// more often than Codex's own request after its compaction did
	// (Codex's compaction keeps the user's texts, not their images).
	run("image-compact-fork-switch", func(t *testing.T, m func(int) string) {
		ctx := context.Background()
		sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", Cwd: t.TempDir(), HistoryMessages: 2})
		must(t, err)
		id := sess.Id
		_, err = r.c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: id, Messages: []*castv1.Message{
			{ClientId: "h1", Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: dmsg(m(1)), Images: []*castv1.Image{{MediaType: "image/png", Data: seamPNG(t, 90)}}},
			{ClientId: "h2", Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "a picture"}}})
		must(t, err)
		s2 := r.send(id, dmsg(m(2)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s2)
		if n := imageCount(requestWith(t, r.fake, m(2))); n != 1 {
			t.Fatalf("codex's first request holds %d images, want 1", n)
		}
		summaries := r.compactOn(id, dmsg(m(3)), fakemodel.Reply{Shell: "echo compacting", InputTokens: 1_000_000})
		if len(summaries) != 1 {
			t.Fatalf("%d compaction summaries stored, want 1 (Codex did not compact)", len(summaries))
		}
		s4 := r.send(id, dmsg(m(4)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s4)
		own := imageCount(requestWith(t, r.fake, m(4)))
		fork, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: id, Agent: "claude"})
		must(t, err)
		// The fork's first turn on claude, its first on codex (rebuilt
		// after the switch) and its next on codex (resumed).
		for i, agent := range []string{"claude", "codex", "codex"} {
			if i == 1 {
				r.switchTo(fork.Id, agent)
			}
			seq := r.send(fork.Id, dmsg(m(5+i)))
			r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
			req := requestWith(t, r.fake, m(5+i))
			assertHeldOnce(t, req, marksUpTo(m, 5+i)...)
			if n := imageCount(req); n > own {
				t.Errorf("the fork's %s request holds %d images; codex's own after its compaction held %d", agent, n, own)
			}
			if n := strings.Count(heldText(req), strings.TrimSpace(summaries[0])); n > 1 {
				t.Errorf("the fork's %s request holds the summary %d times:\n%s", agent, n, clipItems(heldText(req)))
			}
		}
	})
}

// A migration in flight meets a message.
//
// `cast exec --resume` while the session's move to linux is held after
// its fence: exec answers once the move is done, from linux, or from
// laptop when the move failed and was rolled back, and the prompt
// reaches the model once.
//
// A migration cancelled while its drain waits for a running turn, and
// one cancelled after its drain stopped the turn, each with one message
// queued behind the turn before the move and one sent during it: the
// session stays on laptop, no request holds a message twice, and the
// requests after the cancel hold every message once, in order.
func TestDeliveryAtAMigrationInFlight(t *testing.T) {
	t.Parallel()
	hold := &pointHold{}
	r := newMigRig(t, migOpts{cpConfig: func(cfg *controlplane.Config) { cfg.Migrate.Failpoint = hold.hook }}, "claude")
	ctx := context.Background()

	// rollBack: the move fails after its fence (--skip-worktree, and
	// linux has no checkout at the mapped path) and is rolled back.
	for _, rollBack := range []bool{false, true} {
		name := map[bool]string{false: "exec", true: "exec-rolled-back"}[rollBack]
		t.Run(name, func(t *testing.T) {
			m := func(n int) string { return fmt.Sprintf("MIGF-%s-%d.", name, n) }
			id := r.laptopTurn(name, dmsg(m(1)))
			wait, let := hold.arm(t, "migrate.after-fence")
			mig, err := r.c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "linux", SessionIds: []string{id}, SkipWorktree: rollBack})
			must(t, err)
			wait()
			type result struct {
				out, errOut string
				code        int
			}
			done := make(chan result, 1)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, errOut, code := testharness.RunInput(t, r.cast.env, nil, 4*time.Minute, r.cast.bin, "exec", "--resume", id, dmsg(m(2)))
				done <- result{out, errOut, code}
			}()
			defer wg.Wait()
			testharness.WaitFor(t, time.Minute, "exec's prompt stored", func() bool { return r.session(id).LastSeq > 2 })
			let()
			want, node, said := castv1.MigrationState_MIGRATION_STATE_SUCCEEDED, "linux", "now runs on linux"
			if rollBack {
				want, node, said = castv1.MigrationState_MIGRATION_STATE_FAILED, "laptop", "last user said: w00"
			}
			if mig = r.waitMigration(mig.Id); mig.State != want {
				t.Fatalf("migration %v (%s), want %v", mig.State, mig.Reason, want)
			}
			var res result
			select {
			case res = <-done:
			case <-time.After(5 * time.Minute):
				t.Fatal("exec did not end")
			}
			// The answer quotes the prompt's start: the note that it moved, or
			// the prompt itself where it did not.
			if res.code != 0 || !strings.Contains(res.out, "FAKE-ANSWER") || !strings.Contains(res.out, said) {
				t.Fatalf("exec during the move: exit %d out %q err %q", res.code, res.out, res.errOut)
			}
			if s := r.session(id); s.Node != node {
				t.Fatalf("after the move the session is on %s, want %s", s.Node, node)
			}
			if n := countTurnsWith(r.fake, m(2)); n != 1 {
				t.Fatalf("exec's prompt started %d model requests, want 1", n)
			}
			assertDeliveredOnce(t, requestWith(t, r.fake, m(2)), m(1), m(2))
			r.nextTurnHoldsOnce(id, m(3), m(1), m(2))
		})
	}

	// stopAfter: the move's drain stops the running turn (--wait 1s) and
	// the move is cancelled after that; otherwise it is cancelled while
	// the drain waits for the turn.
	for _, stopAfter := range []bool{false, true} {
		name := map[bool]string{false: "cancel-draining", true: "cancel-stopped"}[stopAfter]
		t.Run(name, func(t *testing.T) {
			m := func(n int) string { return fmt.Sprintf("MIGF-%s-%d.", name, n) }
			id := r.laptopTurn(name, dmsg(m(1)))
			gate := make(chan struct{})
			var once sync.Once
			open := func() { once.Do(func() { close(gate) }) }
			defer open()
			r.fake.Enqueue(fakemodel.Reply{Text: "held answer", Gate: gate})
			n := r.fake.TurnsStarted()
			r.send(id, dmsg(m(2)))
			testharness.WaitFor(t, 2*time.Minute, "the turn at the model", func() bool { return r.fake.TurnsStarted() > n })
			r.send(id, dmsg(m(3)))
			wait, let := func() {}, func() {}
			drain := 10 * time.Minute
			if stopAfter {
				wait, let = hold.arm(t, "migrate.after-drain")
				drain = time.Second
			}
			mig, err := r.c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "linux", SessionIds: []string{id},
				Wait: durationpb.New(drain), SkipWorktree: true})
			must(t, err)
			if stopAfter {
				wait()
			} else {
				testharness.WaitFor(t, 2*time.Minute, "the move drains the turn", func() bool {
					got, err := r.c.Migrations.GetMigration(ctx, &castv1.GetMigrationRequest{Id: mig.Id})
					return err == nil && len(got.Sessions) == 1 && got.Sessions[0].State == castv1.MigrationState_MIGRATION_STATE_DRAINING_TURN
				})
			}
			s4 := r.send(id, dmsg(m(4)))
			_, err = r.c.Migrations.CancelMigration(ctx, &castv1.CancelMigrationRequest{Id: mig.Id})
			must(t, err)
			let()
			if mig = r.waitMigration(mig.Id); mig.State != castv1.MigrationState_MIGRATION_STATE_CANCELLED {
				t.Fatalf("migration %v (%s), want cancelled", mig.State, mig.Reason)
			}
			open()
			s := r.waitAnswered(id, s4)
			if s.Node != "laptop" {
				t.Fatalf("after the cancelled move the session is on %s", s.Node)
			}
			// m2's turn ran on (or ran again, stopped); m3 and m4 ran after
			// it, in one turn or two: every request holds each message at
			// most once, and the last one each message once, in order.
			held := 1
			if stopAfter {
				held = 0
			}
			r.assertAnswers(id, map[string]int{"held answer": held})
			for _, req := range r.fake.Turns()[n:] {
				for _, k := range []int{1, 2, 3, 4} {
					if c := strings.Count(userText(req), m(k)); c > 1 {
						t.Errorf("a request holds %s %d times:\n%s", m(k), c, clipItems(userText(req)))
					}
				}
			}
			assertDeliveredOnce(t, requestWith(t, r.fake, m(4)), m(1), m(2), m(3), m(4))
			r.nextTurnHoldsOnce(id, m(5), m(1), m(2), m(3), m(4))
		})
	}
}
