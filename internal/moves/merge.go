package moves

import (
	"context"
	"errors"
	"fmt"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/archive"
	"github.com/cast-dev/cast/internal/delivery"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/wire"
)

// MergeRequest brings a fork's work back to its parent.
type MergeRequest struct {
	ForkID string
	// Run starts a turn on the parent so its agent answers the merge.
	Run bool
	// Message, when set, is the parent's next user message, stored with
	// the merge; a turn runs on it (Run is implied).
	Message string
}

// Merged is what Merge brought back.
type Merged struct {
	Parent            *castv1.Session
	From, To          int64
	Included, Omitted int
	// PromptSeq is the parent's user message that runs a turn on the
	// merge; 0 when nothing runs.
	PromptSeq int64
}

// Merge brings a fork's work after its merged_upto_seq (else its fork
// point) into the parent's history: a merge notice plus one message framed
// as history (the slice rules). That message is not a user message, so it
// starts no turn: the parent's agent reads it on its next turn, as what
// happened in the session while it was not running (the node's delta). A
// turn runs now only when asked: r.Message is stored after it as the
// parent's next user message, or with r.Run alone a short one asking the
// agent to take the merge in.
//
// It refuses while the parent runs a turn or has user messages waiting
// for one: that turn's answer would be stored after the merged work and
// mark it seen. Merging again brings only what is new; a retried merge
// stores nothing twice (client ids derive from the fork and the range).
//
// The parent's append and the fork's new merged_upto_seq are writes to
// two sessions, so the range is recorded on the fork first
// (merge_pending_upto_seq). A merge that failed between the two writes
// left it there; the next merge finishes that range first, the same
// messages under the same client ids (the parent answers what it holds as
// already stored), then merges what the fork did since as a merge of its
// own, which carries the prompt. Both come back as one Merged.
func Merge(ctx context.Context, st Store, r MergeRequest) (Merged, error) {
	fork, err := st.GetSession(ctx, r.ForkID)
	if err != nil {
		return Merged{}, err
	}
	if fork.ParentId == "" || fork.Subagent {
		return Merged{}, errs.Invalid("%s is not a fork; `cast fork` makes one", r.ForkID)
	}
	parent, err := st.GetSession(ctx, fork.ParentId)
	if err != nil {
		return Merged{}, err
	}
	if err := mergeable(ctx, st, parent); err != nil {
		return Merged{}, err
	}
	if err := forkSettled(ctx, st, fork); err != nil {
		return Merged{}, err
	}
	from := max(fork.MergedUptoSeq, fork.ForkedAtSeq) + 1
	pending := fork.MergePendingUptoSeq
	var unfinished, fresh []transcript.Message
	if err := eachMessage(ctx, st, r.ForkID, from, fork.LastSeq, func(m *castv1.Message) error {
		if m.Seq <= pending {
			unfinished = append(unfinished, wire.FromProto(m))
		} else {
			fresh = append(fresh, wire.FromProto(m))
		}
		return nil
	}); err != nil {
		return Merged{}, err
	}
	more := len(delivery.ContentSeqs(fresh)) > 0
	if pending == 0 && !more {
		return Merged{}, errs.New(errs.KindFailedPrecondition, "NOTHING_TO_MERGE", "fork %s has nothing new since its last merge", r.ForkID)
	}
	var out Merged
	at := parent.LastSeq // what mergeable saw: the appends store only on it
	if pending > 0 {
		// The prompt goes with the last merge: a retry of the same
		// request with nothing newer stores the very batch it failed on.
		if out, at, err = mergeRange(ctx, st, r, fork, parent, at, unfinished, from, pending, !more); err != nil || !more {
			return out, err
		}
		from = pending + 1
	}
	last, _, err := mergeRange(ctx, st, r, fork, parent, at, fresh, from, fork.LastSeq, true)
	if err != nil {
		return Merged{}, err
	}
	if pending > 0 {
		last.From, last.Included, last.Omitted = out.From, last.Included+out.Included, last.Omitted+out.Omitted
	}
	return last, nil
}

// mergeRange stores the fork's msgs (from..to) in the parent as one merge,
// with the prompt r asks for when withPrompt, and moves the fork's
// merged_upto_seq to to. The range is recorded on the fork before the
// append and cleared with merged_upto_seq, so a failure between the two
// writes leaves it for the next merge to finish (see Merge).
//
// The append stores only while the parent's last seq is still at, the one
// mergeable checked (and any merge before this one left): a message
// stored in between, a send or a worker's report, runs a turn whose
// request the merged rows did not precede, so the merge is refused
// (PARENT_CHANGED) with nothing stored in the parent. It returns the
// parent's last seq after its append.
func mergeRange(ctx context.Context, st Store, r MergeRequest, fork, parent *castv1.Session, at int64, msgs []transcript.Message, from, to int64, withPrompt bool) (Merged, int64, error) {
	window := 0
	if a, ok := agents.Lookup(parent.Agent); ok {
		window = a.ContextWindow
	}
	sl := fitSlice(msgs, delivery.SliceOptions{SessionID: fork.Id, ContextWindow: window, Span: delivery.Range{From: from, To: to},
		Heading: fmt.Sprintf("Work done in fork %s (on %s) since it split off", fork.Id, agents.DisplayName(fork.Agent)),
		End:     fmt.Sprintf("[cast] End of the work done in fork %s.", fork.Id)})
	key := fmt.Sprintf("merge.%s.%d.%d", fork.Id, from, to)
	batch := []*castv1.Message{
		{ClientId: key + ".notice", Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE, NoticeType: transcript.NoticeMerge,
			Text: fmt.Sprintf("Merged fork %s (messages %d:%d): %d items included, %d omitted.", fork.Id, from, to, sl.Included, sl.Omitted)},
		// Content, but no user message: the dispatcher hands only user
		// messages to the node, so it wakes no agent.
		{ClientId: key + ".history", Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: sl.Text},
	}
	if prompt := mergePrompt(r, fork, from, to); withPrompt && prompt != "" {
		batch = append(batch, &castv1.Message{ClientId: key + ".prompt", Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: prompt})
	}
	// The intent, before the append: a merge that fails after the append
	// must leave the range for the next one to finish, not to cover again
	// under the client ids of a longer range. A merge that moved the fork
	// since it was read (or holds another range) wins; this one stops.
	if _, err := st.UpdateSession(ctx, fork.Id, func(s *castv1.Session) error {
		if max(s.MergedUptoSeq, s.ForkedAtSeq)+1 != from || s.MergePendingUptoSeq != 0 && s.MergePendingUptoSeq != to {
			return errs.New(errs.KindAborted, errs.ReasonConflict,
				"another merge of fork %s is under way or just finished; merge again", fork.Id)
		}
		s.MergePendingUptoSeq = to
		return nil
	}); err != nil {
		return Merged{}, 0, err
	}
	// mergeable's checks, in the txn: not archived (Open), nothing stored
	// since (Unmoved).
	g := fence.Guard{Open: true, Unmoved: true, LastSeq: at}
	stored, err := st.Append(ctx, parent.Id, batch, g)
	if errs.HasReason(err, errs.ReasonClientIDReused) && fork.MergePendingUptoSeq == to {
		// Finishing an interrupted merge the parent holds in part under
		// another body: the fork's or the parent's agent changed in between
		// and the history renders differently (or another message was given).
		stored, err = fence.AppendEach(ctx, st, parent.Id, batch, g)
	}
	if errs.HasReason(err, errs.ReasonSessionChanged) {
		// The range stays recorded on the fork: the next merge finishes it.
		return Merged{}, 0, errs.New(errs.KindAborted, "PARENT_CHANGED",
			"parent %s got a message while fork %s's messages %d:%d were being merged into it; they were not: merge again once its turn has run (`cast watch %s`)",
			parent.Id, fork.Id, from, to, parent.Id)
	}
	if err != nil {
		return Merged{}, 0, err
	}
	for _, m := range stored {
		at = max(at, m.Seq) // new rows take the next seqs; rows stored before, older ones
	}
	if _, err := st.UpdateSession(ctx, fork.Id, func(s *castv1.Session) error {
		s.MergedUptoSeq = max(s.MergedUptoSeq, to)
		if s.MergePendingUptoSeq == to {
			s.MergePendingUptoSeq = 0
		}
		return nil
	}); err != nil {
		return Merged{}, 0, err
	}
	out := Merged{From: from, To: to, Included: sl.Included, Omitted: sl.Omitted}
	if len(stored) == 3 {
		out.PromptSeq = stored[2].Seq
	}
	out.Parent, err = st.GetSession(ctx, parent.Id)
	return out, at, err
}

// mergePrompt is the user message that runs the parent's turn on a merge:
// the one given, or with Run alone a short ask; "" when nothing runs.
func mergePrompt(r MergeRequest, fork *castv1.Session, from, to int64) string {
	switch {
	case r.Message != "":
		return r.Message
	case r.Run:
		return fmt.Sprintf("[cast] The work done in fork %s (on %s, messages %d:%d) was merged into this conversation above. Take it in and carry on from it.",
			fork.Id, agents.DisplayName(fork.Agent), from, to)
	}
	return ""
}

// mergeable refuses a parent that cannot take merged history now: an
// archived one, one whose agent is at work, and one with user messages
// no turn has taken yet (the turn that takes them would be answered after
// the merged work and count it as seen without having been shown it).
func mergeable(ctx context.Context, st Store, parent *castv1.Session) error {
	if err := archive.Sendable(parent); err != nil {
		return err
	}
	if fence.TurnInFlight(parent) {
		return errs.New(errs.KindFailedPrecondition, "PARENT_RUNNING",
			"parent %s is running a turn; merge when it is idle (or `cast interrupt -s %s`)", parent.Id, parent.Id)
	}
	waiting, err := firstWaiting(ctx, st, parent)
	if err != nil || waiting == 0 {
		return err
	}
	return errs.New(errs.KindFailedPrecondition, "PARENT_PENDING",
		"parent %s has a message waiting for a turn (#%d, %s); merge once it has run (`cast watch %s`)",
		parent.Id, waiting, stateWord(parent), parent.Id)
}

// forkSettled refuses a fork whose turn is under way or about to start: the
// merge would carry its request without the answer (the half turn the
// parent's agent would take for the fork's last word), the answer coming
// only with a later merge.
func forkSettled(ctx context.Context, st Store, fork *castv1.Session) error {
	if fence.TurnInFlight(fork) {
		return errs.New(errs.KindFailedPrecondition, "FORK_RUNNING",
			"fork %s is running a turn; merge when it is idle (`cast watch %s`, or `cast interrupt %s`)", fork.Id, fork.Id, fork.Id)
	}
	if fork.State != castv1.SessionState_SESSION_STATE_IDLE {
		return nil // failed, parked: what it holds is what there is to merge
	}
	waiting, err := firstWaiting(ctx, st, fork)
	if err != nil || waiting == 0 {
		return err
	}
	return errs.New(errs.KindFailedPrecondition, "FORK_PENDING",
		"fork %s has a message waiting for a turn (#%d); merge once it has run (`cast watch %s`)", fork.Id, waiting, fork.Id)
}

// RunsNothing says whether s runs no turn and has none about to start:
// idle (or failed, or parked), and no user message waits past its
// delivery cursor (a message just sent leaves the session idle until the
// node reports its turn running) other than those a failed or parked turn
// holds (HeldSeq: they run with the next message, or a parked turn's with
// the next fleet credential, not before). A switch and an interrupt send
// nothing to stop then.
func RunsNothing(ctx context.Context, st Store, s *castv1.Session) (bool, error) {
	if s.State != castv1.SessionState_SESSION_STATE_IDLE && !fence.Holds(s.State) {
		return false, nil
	}
	var held int64
	if fence.Holds(s.State) {
		held = s.HeldSeq
	}
	waiting, err := firstWaitingAfter(ctx, st, s, held)
	return waiting == 0, err
}

// firstWaiting is the seq of the parent's first user message after its
// delivery cursor (and any imported history), 0 when there is none.
func firstWaiting(ctx context.Context, st Store, s *castv1.Session) (int64, error) {
	return firstWaitingAfter(ctx, st, s, 0)
}

// firstWaitingAfter is firstWaiting past seq after too.
func firstWaitingAfter(ctx context.Context, st Store, s *castv1.Session, after int64) (int64, error) {
	start := max(s.DeliveredSeq, s.HistorySeq, after) + 1
	if start > s.LastSeq {
		return 0, nil
	}
	var first int64
	err := eachMessage(ctx, st, s.Id, start, s.LastSeq, func(m *castv1.Message) error {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER && !ids.History(m.ClientId) { // adopted or synced rows are history
			first = m.Seq
			return errFound
		}
		return nil
	})
	if errors.Is(err, errFound) {
		return first, nil
	}
	return 0, err
}

// errFound stops a read once it found what it looked for.
var errFound = errors.New("found")

func stateWord(s *castv1.Session) string {
	switch s.State {
	case castv1.SessionState_SESSION_STATE_PARKED:
		return "parked on a usage limit"
	case castv1.SessionState_SESSION_STATE_FAILED:
		return "held: " + s.StateReason
	}
	return "not started yet"
}

// deltaItemHead bounds what the node's delta adds around the merged
// message when it renders it as one item ("[#123 assistant]\n" and the
// separator).
const deltaItemHead = 48

// fitSlice renders msgs so that the merged message, rendered again as one
// item of the parent's next delta (delivery.Slice at the parent's budget),
// still fits that budget: an item that does not fit is left out whole,
// and the parent's agent would get only a pointer to the merge.
func fitSlice(msgs []transcript.Message, opt delivery.SliceOptions) delivery.SliceResult {
	limit := delivery.Budget(0, opt.ContextWindow)
	opt.Budget = limit
	for range 4 { // the framing hardly changes with the budget: two rounds do
		sl := delivery.Slice(msgs, opt)
		over := len(sl.Text) + deltaItemHead - limit
		if over <= 0 || opt.Budget-over < 1 {
			return sl
		}
		opt.Budget -= over
	}
	return delivery.Slice(msgs, opt)
}
