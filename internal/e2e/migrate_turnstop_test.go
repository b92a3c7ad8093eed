package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A migration cancelled after its drain stopped the source's turn (--wait
// ran out) leaves the session where it was: the stopped turn's prompt,
// acknowledged before the move, runs again there, answered once, and it
// reaches that turn's model request once, as it does the next turn's.
func TestMigrationCancelledAfterItStoppedTheTurn(t *testing.T) {
	t.Parallel()
	drained, release := make(chan struct{}), make(chan struct{})
	var drainOnce, releaseOnce sync.Once
	r := newMigRig(t, migOpts{cpConfig: func(cfg *controlplane.Config) {
		// The move holds after its drain (the turn stopped, nothing
		// moved yet) until the test has cancelled it.
		cfg.Migrate.Failpoint = func(name string) {
			if name == "migrate.after-drain" {
				drainOnce.Do(func() { close(drained) })
				<-release
			}
		}
	}}, "claude")
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo) // before the control plane stops: it waits for the move
	m := func(n int) string { return fmt.Sprintf("MARK-MCS-%d", n) }
	id := r.firstTurn(dmsg(m(1)))
	stopped := make(chan struct{})
	defer close(stopped)
	r.fake.Enqueue(fakemodel.Reply{Text: "never given", Gate: stopped}, fakemodel.Reply{Text: "ANSWER-AFTER-CANCEL"})
	seq, mig := r.moveMidTurn(id, dmsg(m(2)))
	select {
	case <-drained:
	case <-time.After(3 * time.Minute):
		t.Fatal("the move's drain did not end")
	}
	if s := r.session(id); !s.LastTurnAbandoned {
		t.Fatalf("after the drain: state %v, abandoned %v; want the turn stopped to run again", s.State, s.LastTurnAbandoned)
	}
	if out := r.cast.must("get", id); !strings.Contains(out, "its prompt runs again once the move ends") || strings.Contains(out, "last error") {
		t.Fatalf("cast get of the stopped turn's session while it moves:\n%s\nwant its prompt to run again, no last error", out)
	}
	if _, err := r.c.Migrations.CancelMigration(context.Background(), &castv1.CancelMigrationRequest{Id: mig.Id}); err != nil {
		t.Fatal(err)
	}
	letGo()
	if mig = r.waitMigration(mig.Id); mig.State != castv1.MigrationState_MIGRATION_STATE_CANCELLED {
		t.Fatalf("migration %v (%s), want cancelled", mig.State, mig.Reason)
	}
	s := r.waitAnswered(id, seq)
	if s.Node != "laptop" || s.LastExitCode != 0 {
		t.Fatalf("after the cancelled move: node %q, last exit code %d; want laptop, 0", s.Node, s.LastExitCode)
	}
	assertDeliveredOnce(t, requestWith(t, r.fake, m(2)), m(1), m(2))
	r.assertAnswers(id, map[string]int{"ANSWER-AFTER-CANCEL": 1, "never given": 0})
	r.nextTurnHoldsOnce(id, m(3), m(1), m(2))
}

// A migration into a node whose CLI of the session's agent failed cast's
// check becomes a handoff (a new session there, from a brief): the session
// does not move, and its turn under way is not stopped. Its acknowledged
// prompt is answered once on the source, and reaches the next turn's
// request there once.
func TestMigrationHandedOffWhileATurnRuns(t *testing.T) {
	t.Parallel()
	r := newMigRig(t, migOpts{}, "claude")
	m := func(n int) string { return fmt.Sprintf("MARK-MHO-%d", n) }
	id := r.firstTurn(dmsg(m(1)))
	r.failCheck("linux", "claude")
	answer := make(chan struct{})
	var answerOnce sync.Once
	letAnswer := func() { answerOnce.Do(func() { close(answer) }) }
	defer letAnswer()
	r.fake.Enqueue(fakemodel.Reply{Text: "SOURCE-ANSWER", Gate: answer})
	seq, mig := r.moveMidTurn(id, dmsg(m(2)))
	mig = r.waitMigration(mig.Id)
	if len(mig.Sessions) != 1 || mig.Sessions[0].State != castv1.MigrationState_MIGRATION_STATE_HANDED_OFF {
		t.Fatalf("migration %v (%s): %v; want the session handed off", mig.State, mig.Reason, mig.Sessions)
	}
	letAnswer()
	s := r.waitAnswered(id, seq)
	if s.Node != "laptop" || s.LastExitCode != 0 || s.LastTurnInterrupted {
		t.Fatalf("after the handoff: node %q, last exit code %d, interrupted %v; want laptop, 0, false", s.Node, s.LastExitCode, s.LastTurnInterrupted)
	}
	assertDeliveredOnce(t, requestWith(t, r.fake, m(2)), m(1), m(2))
	r.assertAnswers(id, map[string]int{"SOURCE-ANSWER": 1})
	r.nextTurnHoldsOnce(id, m(3), m(1), m(2))
}

// moveMidTurn sends text, waits until its turn's request reaches the model
// and starts a move of the session to linux (--wait 1s, no work tree); it
// returns the prompt's seq and the migration.
func (r *migRig) moveMidTurn(id, text string) (int64, *castv1.Migration) {
	r.t.Helper()
	ctx := context.Background()
	n := r.fake.TurnsStarted()
	sent, err := r.c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: id, Text: text})
	if err != nil {
		r.t.Fatal(err)
	}
	testharness.WaitFor(r.t, 2*time.Minute, "the prompt's request reaches the model on laptop", func() bool { return r.fake.TurnsStarted() > n })
	mig, err := r.c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "linux", SessionIds: []string{id},
		Wait: durationpb.New(time.Second), SkipWorktree: true})
	if err != nil {
		r.t.Fatal(err)
	}
	return sent.Message.Seq, mig
}

// firstTurn starts a claude session on laptop with text and waits for its
// answer.
func (r *migRig) firstTurn(text string) string {
	r.t.Helper()
	return r.laptopTurn("a", text)
}

// laptopTurn is firstTurn in laptop's checkout named repo.
func (r *migRig) laptopTurn(repo, text string) string {
	r.t.Helper()
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: r.repo("laptop", repo), Node: "laptop", Text: text})
	if err != nil {
		r.t.Fatal(err)
	}
	r.waitAnswered(sess.Id, 1)
	return sess.Id
}

// waitAnswered waits until the turn of the prompt at seq ended: idle, the
// delivery cursor past it, no turn left to run again.
func (r *migRig) waitAnswered(id string, seq int64) *castv1.Session {
	r.t.Helper()
	return r.waitSession(fmt.Sprintf("the prompt #%d answered", seq), id, func(s *castv1.Session) bool {
		return s.State == castv1.SessionState_SESSION_STATE_IDLE && s.DeliveredSeq >= seq && !s.LastTurnAbandoned && s.LastSeq > seq
	})
}

// failCheck records a failed resume verdict for the version of agent that
// node reports, as its canary would: moves into it become handoffs.
func (r *migRig) failCheck(node, agent string) {
	r.t.Helper()
	ctx := context.Background()
	var version string
	testharness.WaitFor(r.t, 30*time.Second, node+" reports its "+agent+" version", func() bool {
		resp, err := r.c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
		for _, n := range resp.GetNodes() {
			for _, in := range n.Agents {
				if n.Name == node && in.Name == agent {
					version = in.Version
				}
			}
		}
		return err == nil && version != ""
	})
	if _, err := r.c.Agents.RecordAgentChecks(ctx, &castv1.RecordAgentChecksRequest{Checks: []*castv1.AgentCheck{
		{Agent: agent, Version: version, Capability: "resume", Detail: "the model got the new prompt without the history"}}}); err != nil {
		r.t.Fatal(err)
	}
}

// assertAnswers checks how many assistant messages of the session hold
// each text.
func (r *migRig) assertAnswers(id string, want map[string]int) {
	r.t.Helper()
	for text, n := range want {
		got := 0
		for _, msg := range r.messages(id) {
			if msg.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && strings.Contains(msg.Text, text) {
				got++
			}
		}
		if got != n {
			r.t.Errorf("%d answers %q, want %d", got, text, n)
		}
	}
}

// nextTurnHoldsOnce sends mark as the session's next prompt and checks
// that its model request holds each earlier prompt once, then mark.
func (r *migRig) nextTurnHoldsOnce(id, mark string, earlier ...string) {
	r.t.Helper()
	sent, err := r.c.Sessions.SendMessage(context.Background(), &castv1.SendMessageRequest{SessionId: id, Text: dmsg(mark)})
	if err != nil {
		r.t.Fatal(err)
	}
	r.waitAnswered(id, sent.Message.Seq)
	assertDeliveredOnce(r.t, requestWith(r.t, r.fake, mark), append(earlier, mark)...)
}
