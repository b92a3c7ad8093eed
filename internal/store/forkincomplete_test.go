package store_test

import (
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A fork whose copy of its parent's history stopped part way takes no
// open-only append (a send, an API append: messages its owner would run)
// until the copy is finished: one stored then got a seq within the fork's
// history mark, where the node counts it as history and never delivers
// it. The check is the archive's, on the record the append reads anyway
// (the record's last_seq is not kept: the seq key is the count), inline
// and for a large message before its chunks are written. The fork's own
// copy (no Open) goes in; once it is finished, sends do, past the mark.
// A session imported with history (history_seq, no fork) takes its
// history through open-only appends, as before.
func TestHalfCopiedForkRefusesOpenAppends(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, smallChunks)
	cli := etcdClient(t, ep)
	ctx := ctxT(t)

	parent := newSession(t, s, "n1").Session
	var history []*castv1.Message
	for _, text := range []string{"parent a", "parent b", "parent c"} {
		out, err := s.Append(ctx, parent.Id, []*castv1.Message{userMsg(text)}, fence.Guard{})
		if err != nil {
			t.Fatal(err)
		}
		history = append(history, out[0])
	}
	fc, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1",
		ParentID: parent.Id, RootID: parent.Id, ForkedAtSeq: 3, HistorySeq: 3})
	if err != nil {
		t.Fatal(err)
	}
	fork := fc.Session.Id
	copyOne := func(i int) {
		t.Helper()
		m := &castv1.Message{ClientId: fork + ".copy" + string(rune('1'+i)), Kind: history[i].Kind, Text: history[i].Text}
		if out, err := s.Append(ctx, fork, []*castv1.Message{m}, fence.Guard{}); err != nil || out[0].Seq != int64(i+1) {
			t.Fatalf("the fork's copy of #%d: %v, %v; want it stored at #%d", i+1, out, err, i+1)
		}
	}
	wantIncomplete := func(what string, err error) {
		t.Helper()
		e, ok := errs.As(err)
		if !ok || e.Kind != errs.KindFailedPrecondition || e.Reason != errs.ReasonForkIncomplete {
			t.Fatalf("%s: %v; want FAILED_PRECONDITION %s", what, err, errs.ReasonForkIncomplete)
		}
	}

	_, err = s.Append(ctx, fork, []*castv1.Message{userMsg("before any copy")}, sent)
	wantIncomplete("a send to a fork holding none of its history", err)
	copyOne(0) // the replica now remembers the fork, not as open
	_, err = s.Append(ctx, fork, []*castv1.Message{userMsg("after one copied")}, sent)
	wantIncomplete("a send to a fork holding 1 of its 3 history messages", err)
	chunks := chunkKeys(t, cli)
	_, err = s.Append(ctx, fork, []*castv1.Message{toolResult("big-to-half-fork", strings.Repeat("x", 4096))}, sent)
	wantIncomplete("a large message to the half-copied fork", err)
	if got := chunkKeys(t, cli); got != chunks {
		t.Errorf("%d chunk keys after the refused large message; want %d (none written)", got, chunks)
	}
	copyOne(1)
	copyOne(2)
	for i, m := range []*castv1.Message{userMsg("after the copy"), userMsg("from memory"), toolResult("big-to-fork", strings.Repeat("y", 4096))} {
		out, err := s.Append(ctx, fork, []*castv1.Message{m}, sent)
		if err != nil || out[0].Seq != int64(4+i) {
			t.Fatalf("message %d to the finished fork: %v, %v; want it stored at #%d", i+1, out, err, 4+i)
		}
	}

	imported, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1", HistorySeq: 2})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Append(ctx, imported.Session.Id, []*castv1.Message{userMsg("imported a"), userMsg("imported b")}, sent); err != nil || len(out) != 2 || out[1].Seq != 2 {
		t.Fatalf("an import's history appended open-only: %v, %v; want #1 and #2", out, err)
	}
}
