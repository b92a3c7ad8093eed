package moves_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/delivery"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/moves"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/wire"
)

// mergeRig is a parent that answered one message and a fork of it, over a
// real store, with no node: merges touch only the store.
type mergeRig struct {
	s            *store.Store
	parent, fork string
	parentToken  int64
	ctx          context.Context
	t            *testing.T
}

func newMergeRig(t *testing.T) *mergeRig {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	// n1 has claude: a fork onto an agent its node lacks is refused.
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n1", Agents: []*castv1.AgentInstall{{Name: "claude"}}}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	r := &mergeRig{s: s, parent: p.Session.Id, parentToken: p.Token, ctx: ctx, t: t}
	r.add(r.parent, castv1.MessageKind_MESSAGE_KIND_USER, "start")
	r.add(r.parent, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "started")
	r.delivered(1)
	f, err := moves.Fork(ctx, s, nil, moves.ForkRequest{SessionID: r.parent, RequestID: fence.RequestKey("test-user", ids.NewClientID())})
	if err != nil {
		t.Fatal(err)
	}
	r.fork = f.Id
	return r
}

func (r *mergeRig) add(id string, kind castv1.MessageKind, text string) int64 {
	r.t.Helper()
	out, err := r.s.Append(r.ctx, id, []*castv1.Message{{ClientId: ids.NewClientID(), Kind: kind, Text: text}}, fence.Guard{})
	if err != nil {
		r.t.Fatal(err)
	}
	return out[0].Seq
}

// delivered records what the parent's node reports at a turn's end.
func (r *mergeRig) delivered(seq int64) {
	r.t.Helper()
	if _, err := r.s.SetState(r.ctx, r.parent, fence.Guard{Node: "n1", Token: r.parentToken},
		fence.TurnState{State: castv1.SessionState_SESSION_STATE_IDLE, DeliveredSeq: seq}); err != nil {
		r.t.Fatal(err)
	}
}

// forkRan records what the fork's node reports at the end of a turn that
// took every message the fork holds.
func (r *mergeRig) forkRan() {
	r.t.Helper()
	sess, err := r.s.GetSession(r.ctx, r.fork)
	if err != nil {
		r.t.Fatal(err)
	}
	r.forkState(castv1.SessionState_SESSION_STATE_IDLE, sess.LastSeq)
}

// forkState records a report of the fork's node.
func (r *mergeRig) forkState(st castv1.SessionState, delivered int64) {
	r.t.Helper()
	node, token, err := r.s.Owner(r.ctx, r.fork)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.s.SetState(r.ctx, r.fork, fence.Guard{Node: node, Token: token},
		fence.TurnState{State: st, DeliveredSeq: delivered}); err != nil {
		r.t.Fatal(err)
	}
}

// A fork's work larger than a slice's budget is merged as one message
// that still fits, whole, in the parent's next delta at the same budget
// (the node renders it as one item there; an item that does not fit is
// left out, and the agent would get a pointer instead of the work).
func TestMergedWorkFitsTheParentsNextDelta(t *testing.T) {
	r := newMergeRig(t)
	// 40 KiB of work in small items against a 16 KiB budget: the chosen
	// ones fill it to the last few bytes.
	for i := range 150 {
		r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_USER, fmt.Sprintf("step %d %s", i, strings.Repeat("u", 100)))
		r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, fmt.Sprintf("did %d %s", i, strings.Repeat("a", 100)))
	}
	r.forkRan()
	m, err := moves.Merge(r.ctx, r.s, moves.MergeRequest{ForkID: r.fork})
	if err != nil {
		t.Fatal(err)
	}
	if m.Omitted == 0 || m.PromptSeq != 0 {
		t.Fatalf("merge: %d omitted (want some), prompt #%d (want none)", m.Omitted, m.PromptSeq)
	}
	msgs, _, err := r.s.ListMessages(r.ctx, r.parent, 3, 0, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[1].Kind != castv1.MessageKind_MESSAGE_KIND_ASSISTANT {
		t.Fatalf("the parent got %d messages, want a notice and the merged history", len(msgs))
	}
	claude, _ := agents.Lookup("claude")
	delta := delivery.Slice([]transcript.Message{wire.FromProto(msgs[1])}, delivery.SliceOptions{SessionID: r.parent, ContextWindow: claude.ContextWindow})
	if delta.Included != 1 {
		t.Fatalf("the merged message (%d bytes) does not fit the parent's next delta (budget %d)", len(msgs[1].Text), delta.Budget)
	}
}

// A merge is refused while the fork's turn runs or its message waits for
// one: it carried the fork's request without its answer (the parent's
// agent took the request for the fork's last word; the answer came only
// with the next merge). It goes through once the fork's turn has ended.
func TestMergeRefusedWhileTheForkRuns(t *testing.T) {
	r := newMergeRig(t)
	r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "fork work")
	ask := r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_USER, "and the tests")
	_, err := moves.Merge(r.ctx, r.s, moves.MergeRequest{ForkID: r.fork})
	if !errs.HasReason(err, "FORK_PENDING") || !strings.Contains(err.Error(), fmt.Sprintf("#%d", ask)) {
		t.Fatalf("merge with the fork's message waiting: %v", err)
	}
	r.forkState(castv1.SessionState_SESSION_STATE_RUNNING, 0)
	if _, err := moves.Merge(r.ctx, r.s, moves.MergeRequest{ForkID: r.fork}); !errs.HasReason(err, "FORK_RUNNING") {
		t.Fatalf("merge while the fork's turn runs: %v", err)
	}
	answer := r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "tests added")
	r.forkRan()
	m, err := moves.Merge(r.ctx, r.s, moves.MergeRequest{ForkID: r.fork})
	if err != nil {
		t.Fatal(err)
	}
	if m.To != answer {
		t.Fatalf("merged through #%d, want the fork's answer #%d", m.To, answer)
	}
}

// A merge is refused while the parent has a user message no turn took
// yet (that turn's answer, stored after the merge, would mark the merged
// work seen), and goes through once the node reports it delivered.
func TestMergeRefusedWhileAParentMessageWaits(t *testing.T) {
	r := newMergeRig(t)
	r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "fork work")
	waiting := r.add(r.parent, castv1.MessageKind_MESSAGE_KIND_USER, "queued")
	_, err := moves.Merge(r.ctx, r.s, moves.MergeRequest{ForkID: r.fork, Run: true})
	if !errs.HasReason(err, "PARENT_PENDING") || !strings.Contains(err.Error(), fmt.Sprintf("#%d", waiting)) {
		t.Fatalf("merge with a message waiting: %v", err)
	}
	r.delivered(waiting)
	m, err := moves.Merge(r.ctx, r.s, moves.MergeRequest{ForkID: r.fork, Run: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.PromptSeq == 0 {
		t.Fatal("merge --run stored no prompt")
	}
}

// A user message a node adopted from the agent's own file (the user ran
// the agent directly) is history, not a message waiting for a turn: it
// does not hold a merge back.
func TestMergeNotHeldByAdoptedRows(t *testing.T) {
	r := newMergeRig(t)
	r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "fork work")
	if _, err := r.s.Append(r.ctx, r.parent, []*castv1.Message{{ClientId: ids.AdoptedPrefix + "d1.1",
		Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "typed in the agent directly"}}, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	if _, err := moves.Merge(r.ctx, r.s, moves.MergeRequest{ForkID: r.fork}); err != nil {
		t.Fatalf("merge after an adopted user row: %v", err)
	}
}

// failingStore fails one write of a merge, as when etcd goes away
// mid-merge: the parent's append (stored, its answer lost) or the fork's
// update after it.
type failingStore struct {
	*store.Store
	fork       string
	loseAppend bool // the parent's append is stored, its answer lost
	failUpdate bool // the fork's first update after the append fails
	appended   bool
	failed     bool
}

var errAway = errors.New("etcd away")

func (s *failingStore) Append(ctx context.Context, id string, msgs []*castv1.Message, g fence.Guard) ([]*castv1.Message, error) {
	out, err := s.Store.Append(ctx, id, msgs, g)
	if err != nil || id == s.fork || s.failed {
		return out, err
	}
	s.appended = true
	if s.loseAppend {
		s.failed = true
		return nil, errAway
	}
	return out, nil
}

func (s *failingStore) UpdateSession(ctx context.Context, id string, fn func(*castv1.Session) error) (*castv1.Session, error) {
	if s.failUpdate && s.appended && id == s.fork && !s.failed {
		s.failed = true
		return nil, errAway
	}
	return s.Store.UpdateSession(ctx, id, fn)
}

// A merge that failed after its append reached the parent, retried once
// the fork did more work, brings each piece of the fork's work into the
// parent once: the retry finishes the first range (answered as already
// stored, even when an agent switched in between and the range renders
// differently) before it merges what came after it, and a merge after
// that finds nothing new.
func TestRetriedMergeStoresEachRangeOnce(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		loseAppend, failUpdate bool
		run                    bool
		forkAgent              string // the fork switches to it before the retry
	}{
		{name: "fork update fails", failUpdate: true},
		{name: "fork update fails, with a turn", failUpdate: true, run: true},
		{name: "append answer lost", loseAppend: true},
		{name: "fork switched agents before the retry", failUpdate: true, run: true, forkAgent: "codex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newMergeRig(t)
			st := &failingStore{Store: r.s, fork: r.fork, loseAppend: tc.loseAppend, failUpdate: tc.failUpdate}
			req := moves.MergeRequest{ForkID: r.fork, Run: tc.run}
			// taken: a turn ran on the merge's prompt, if it stored one
			// (a merge is refused while the parent has one waiting).
			taken := func() {
				if tc.run {
					parent, err := r.s.GetSession(r.ctx, r.parent)
					if err != nil {
						t.Fatal(err)
					}
					r.delivered(parent.LastSeq)
				}
			}
			work := []string{"first-piece", "second-piece"}
			for _, w := range work {
				r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, w)
			}
			if _, err := moves.Merge(r.ctx, st, req); !errors.Is(err, errAway) || !st.failed {
				t.Fatalf("merge with etcd going away: %v, want it to fail", err)
			}
			taken()
			if tc.forkAgent != "" {
				if _, err := r.s.UpdateSession(r.ctx, r.fork, func(s *castv1.Session) error {
					s.Agent = tc.forkAgent
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			for _, w := range []string{"third-piece", "fourth-piece"} {
				work = append(work, w)
				r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, w)
			}
			m, err := moves.Merge(r.ctx, st, req)
			if err != nil {
				t.Fatalf("retried merge: %v", err)
			}
			fork, err := r.s.GetSession(r.ctx, r.fork)
			if err != nil {
				t.Fatal(err)
			}
			if m.To != fork.LastSeq || fork.MergedUptoSeq != fork.LastSeq || fork.MergePendingUptoSeq != 0 {
				t.Errorf("retried merge to #%d; the fork (last #%d) merged up to #%d, pending #%d",
					m.To, fork.LastSeq, fork.MergedUptoSeq, fork.MergePendingUptoSeq)
			}
			taken()
			if _, err := moves.Merge(r.ctx, st, req); !errs.HasReason(err, "NOTHING_TO_MERGE") {
				t.Errorf("merge after the retry: %v, want NOTHING_TO_MERGE", err)
			}
			msgs, _, err := r.s.ListMessages(r.ctx, r.parent, 1, 0, 100, "")
			if err != nil {
				t.Fatal(err)
			}
			prompts := 0
			for _, m := range msgs {
				if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER && strings.HasPrefix(m.ClientId, "merge.") {
					prompts++
				}
			}
			for _, w := range work {
				n := 0
				for _, m := range msgs {
					n += strings.Count(m.Text, w)
				}
				if n != 1 {
					t.Errorf("the parent holds the fork's %q %d times, want once", w, n)
				}
			}
			// With --run, one turn per merged range: the failed merge's
			// prompt ran one on the first; the retry asks one for the rest.
			if want := map[bool]int{false: 0, true: 2}[tc.run]; prompts != want {
				t.Errorf("the parent holds %d merge prompts, want %d", prompts, want)
			}
		})
	}
}

// racingStore stores a message in the parent (sent) just before the
// merge's append reaches the store: after the merge checked the parent
// idle with nothing waiting, before its rows commit.
type racingStore struct {
	*store.Store
	parent string
	send   func() int64
	sent   int64
}

func (s *racingStore) Append(ctx context.Context, id string, msgs []*castv1.Message, g fence.Guard) ([]*castv1.Message, error) {
	if id == s.parent && s.sent == 0 && strings.HasPrefix(msgs[0].ClientId, "merge.") {
		s.sent = s.send()
	}
	return s.Store.Append(ctx, id, msgs, g)
}

// A message that reaches the parent between the merge's check (idle,
// nothing waiting) and its append — the user's, or a worker's report —
// runs a turn on the parent. The merge stored its rows after it anyway:
// the turn's model request, answered after the merged work, marked it
// seen without having been shown it, and with --run the merge's prompt ran
// a second turn behind the message. The merge is refused instead
// (PARENT_CHANGED, nothing stored), and goes through, after the message,
// once the message's turn has run: the message is stored once, before
// the merged work.
func TestMergeRefusedWhenAMessageLandsBeforeItsAppend(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  bool
		send func(r *mergeRig) int64
	}{
		{name: "the user sends", send: func(r *mergeRig) int64 {
			return r.add(r.parent, castv1.MessageKind_MESSAGE_KIND_USER, "meanwhile, a question")
		}},
		{name: "the user sends, merge --run", run: true, send: func(r *mergeRig) int64 {
			return r.add(r.parent, castv1.MessageKind_MESSAGE_KIND_USER, "meanwhile, a question")
		}},
		{name: "a worker reports", send: func(r *mergeRig) int64 {
			w, err := r.s.CreateSession(r.ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1", ParentID: r.parent, Subagent: true})
			if err != nil {
				r.t.Fatal(err)
			}
			if _, err := notifyIdle(r.ctx, r.s, w.Session.Id); err != nil {
				r.t.Fatal(err)
			}
			p, err := r.s.GetSession(r.ctx, r.parent)
			if err != nil {
				r.t.Fatal(err)
			}
			return p.LastSeq
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newMergeRig(t)
			r.add(r.fork, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "fork work")
			st := &racingStore{Store: r.s, parent: r.parent, send: func() int64 { return tc.send(r) }}
			req := moves.MergeRequest{ForkID: r.fork, Run: tc.run}
			_, err := moves.Merge(r.ctx, st, req)
			if st.sent == 0 {
				t.Fatalf("the merge made no append to the parent (%v)", err)
			}
			if !errs.HasReason(err, "PARENT_CHANGED") {
				t.Errorf("merge with a message stored after its check: %v, want PARENT_CHANGED", err)
			}
			if e, ok := errs.As(err); ok && e.Kind != errs.KindAborted {
				t.Errorf("kind %v, want aborted (retryable)", e.Kind)
			}
			msgs, _, err := r.s.ListMessages(r.ctx, r.parent, st.sent, 0, 100, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 1 {
				t.Errorf("after the refused merge the parent holds %d messages from #%d, want only the message sent (#%d)", len(msgs), st.sent, st.sent)
			}
			// The message's turn runs; the merge goes through after it.
			r.delivered(st.sent)
			m, err := moves.Merge(r.ctx, r.s, req)
			if err != nil {
				t.Fatalf("merge once the message's turn ran: %v", err)
			}
			if m.From != 3 || m.To == 0 {
				t.Errorf("merged #%d:%d", m.From, m.To)
			}
			msgs, _, err = r.s.ListMessages(r.ctx, r.parent, 1, 0, 100, "")
			if err != nil {
				t.Fatal(err)
			}
			sent, merged := 0, 0
			for _, msg := range msgs {
				switch {
				case msg.Seq == st.sent:
					sent++
				case strings.HasPrefix(msg.ClientId, "merge."):
					merged++
					if msg.Seq < st.sent {
						t.Errorf("merged row #%d stored before the message sent (#%d)", msg.Seq, st.sent)
					}
				}
			}
			if want := map[bool]int{false: 2, true: 3}[tc.run]; sent != 1 || merged != want {
				t.Errorf("the parent holds the message sent %d times (want 1) and %d merged rows (want %d)", sent, merged, want)
			}
		})
	}
}
