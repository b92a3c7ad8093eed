package moves_test

import (
	"testing"

	"github.com/cast-dev/cast/internal/archive"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/moves"
)

// A switch of an archived session is refused before anything is written.
// Before, it interrupted the session, changed its model or agent and drew
// the divider in a session closed to messages, and answered as done: the
// user's next `cast send` was refused.
func TestSwitchOfAnArchivedSessionIsRefused(t *testing.T) {
	r := newMergeRig(t)
	if _, err := archive.Archive(r.ctx, r.s, r.parent); err != nil {
		t.Fatal(err)
	}
	before, err := r.s.GetSession(r.ctx, r.parent)
	if err != nil {
		t.Fatal(err)
	}
	_, err = moves.Switch(r.ctx, r.s, nil, moves.SwitchRequest{SessionID: r.parent, Model: "claude-opus-4-1"})
	if e, ok := errs.As(err); !ok || e.Kind != errs.KindFailedPrecondition || e.Reason != errs.ReasonSessionArchived {
		t.Fatalf("switch of an archived session: %v, want FAILED_PRECONDITION %s", err, errs.ReasonSessionArchived)
	}
	after, err := r.s.GetSession(r.ctx, r.parent)
	if err != nil {
		t.Fatal(err)
	}
	if after.Model != before.Model || after.LastSeq != before.LastSeq {
		t.Fatalf("the refused switch wrote: model %q (was %q), last seq %d (was %d)", after.Model, before.Model, after.LastSeq, before.LastSeq)
	}
}
