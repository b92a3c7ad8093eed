package moves

import (
	"context"
	"fmt"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/handoff"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/wire"
)

// Merged is what Merge brought back.
type Merged struct {
	Parent            *castv1.Session
	From, To          int64
	Included, Omitted int
}

// Merge brings a fork's work after its merged_upto_seq (else its fork
// point) back to the parent as a merge notice plus one user message framed
// as history (the slice rules). It refuses while the parent runs a turn.
// Merging again brings only what is new; a retried merge stores nothing
// twice (client ids derive from the fork and the range).
func Merge(ctx context.Context, st Store, forkID string) (Merged, error) {
	fork, err := st.GetSession(ctx, forkID)
	if err != nil {
		return Merged{}, err
	}
	if fork.ParentId == "" || fork.Subagent {
		return Merged{}, errs.Invalid("%s is not a fork; `cast fork` makes one", forkID)
	}
	parent, err := st.GetSession(ctx, fork.ParentId)
	if err != nil {
		return Merged{}, err
	}
	if parent.State == castv1.SessionState_SESSION_STATE_RUNNING || parent.State == castv1.SessionState_SESSION_STATE_WAITING_PERMISSION {
		return Merged{}, errs.New(errs.KindFailedPrecondition, "PARENT_RUNNING",
			"parent %s is running a turn; merge when it is idle (or `cast interrupt -s %s`)", parent.Id, parent.Id)
	}
	from := max(fork.MergedUptoSeq, fork.ForkedAtSeq) + 1
	to := fork.LastSeq
	var msgs []transcript.Message
	if err := eachMessage(ctx, st, forkID, from, to, func(m *castv1.Message) error {
		msgs = append(msgs, wire.FromProto(m))
		return nil
	}); err != nil {
		return Merged{}, err
	}
	if len(handoff.ContentSeqs(msgs)) == 0 {
		return Merged{}, errs.New(errs.KindFailedPrecondition, "NOTHING_TO_MERGE", "fork %s has nothing new since its last merge", forkID)
	}
	window := 0
	if a, ok := agents.Lookup(parent.Agent); ok {
		window = a.ContextWindow
	}
	sl := handoff.Slice(msgs, handoff.SliceOptions{SessionID: forkID, ContextWindow: window,
		Heading: fmt.Sprintf("Work done in fork %s (on %s) since it split off", forkID, displayName(fork.Agent))})
	key := fmt.Sprintf("merge.%s.%d.%d", forkID, from, to)
	notice := &castv1.Message{ClientId: key + ".notice", Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE, NoticeType: transcript.NoticeMerge,
		Text: fmt.Sprintf("Merged fork %s (messages %d:%d): %d items included, %d omitted.", forkID, from, to, sl.Included, sl.Omitted)}
	body := &castv1.Message{ClientId: key + ".body", Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: sl.Text}
	if _, err := st.Append(ctx, parent.Id, []*castv1.Message{notice, body}, store.Guard{}); err != nil {
		return Merged{}, err
	}
	if _, err := st.UpdateSession(ctx, forkID, func(s *castv1.Session) error {
		s.MergedUptoSeq = max(s.MergedUptoSeq, to)
		return nil
	}); err != nil {
		return Merged{}, err
	}
	parent, err = st.GetSession(ctx, parent.Id)
	return Merged{Parent: parent, From: from, To: to, Included: sl.Included, Omitted: sl.Omitted}, err
}
