package moves_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/archive"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/moves"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// parentAndWorker creates a session and a worker of it on a node n1.
func parentAndWorker(ctx context.Context, t *testing.T, s *store.Store) (parent, worker fence.Created) {
	t.Helper()
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n1"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	parent, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	worker, err = s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1",
		ParentID: parent.Session.Id, Subagent: true})
	if err != nil {
		t.Fatal(err)
	}
	return parent, worker
}

// notifyIdle reports to its parent that the worker finished its turn.
func notifyIdle(ctx context.Context, s *store.Store, workerID string) (*castv1.Session, error) {
	w, err := s.GetSession(ctx, workerID)
	if err != nil {
		return nil, err
	}
	w.State = castv1.SessionState_SESSION_STATE_IDLE
	return w, moves.NotifyParent(ctx, s, w)
}

// A worker whose tail holds more tool output than one page (pages are
// bounded in bytes) still reports its newest answer to the parent, not an
// older one from the first page. Small store limits stand in for 16 MiB
// pages and 8 MiB tool outputs.
func TestNotifyParentReadsTheWholeTail(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), func(c *store.Config) {
		c.ChunkBytes, c.MaxMessageBytes, c.PageBytes = 4<<10, 48<<10, 64<<10
		c.MaxBatchBytes = 49 << 10
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parent, worker := parentAndWorker(ctx, t, s)
	answer := func(text string) *castv1.Message {
		return &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: text}
	}
	tail := []*castv1.Message{answer("an older answer")}
	for i := range 4 { // 160 KiB of tool output: three pages of 64 KiB
		tail = append(tail, &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT,
			ToolResult: &castv1.ToolResult{CallId: fmt.Sprint("c", i), Output: strings.Repeat("x", 40<<10)}})
	}
	tail = append(tail, answer("the newest answer"))
	for _, m := range tail {
		if _, err := s.Append(ctx, worker.Session.Id, []*castv1.Message{m}, fence.Guard{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := notifyIdle(ctx, s, worker.Session.Id)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _, err := s.ListMessages(ctx, parent.Session.Id, 1, 0, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	var notice string
	for _, m := range msgs {
		if strings.Contains(m.Text, "[cast] Worker "+w.Id) {
			notice = m.Text
		}
	}
	if !strings.Contains(notice, "Its last answer:\nthe newest answer") {
		t.Fatalf("the parent's notice does not carry the newest answer:\n%s", notice)
	}
}

// An archived parent takes no report from its worker: the report is a
// user message, which would wake the parent's agent in a closed session.
// Its refusal is no error of the report (the worker's state is stored).
func TestNotifyParentSkipsAnArchivedParent(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parent, worker := parentAndWorker(ctx, t, s)
	if _, err := archive.Archive(ctx, s, parent.Session.Id); err != nil {
		t.Fatal(err)
	}
	w := worker.Session
	w.State = castv1.SessionState_SESSION_STATE_IDLE
	if err := moves.NotifyParent(ctx, s, w); err != nil {
		t.Fatalf("a report to an archived parent: %v; want it skipped", err)
	}
	if got, err := s.GetSession(ctx, parent.Session.Id); err != nil || got.LastSeq != 0 {
		t.Fatalf("the archived parent holds %d messages (%v); want none", got.GetLastSeq(), err)
	}
}

// A worker whose turn someone stopped is reported to its parent as
// interrupted, not as finished: its last answer may be half of one.
func TestNotifyParentOfAnInterruptedWorker(t *testing.T) {
	msgs := parentHears(t, fence.TurnState{State: castv1.SessionState_SESSION_STATE_IDLE, ExitCode: 143, Interrupted: true})
	if len(msgs) != 1 || !strings.Contains(msgs[0].Text, "was interrupted") || strings.Contains(msgs[0].Text, "finished.") {
		t.Fatalf("the parent heard of its interrupted worker: %q; want it said interrupted", msgs)
	}
}

// A worker whose turn a move stopped has not finished: its prompt runs
// again on the destination, and its parent hears when that turn ends. It
// heard "finished" at the source's report of the stopped turn.
func TestNotifyParentOfAWorkerAMoveStopped(t *testing.T) {
	msgs := parentHears(t, fence.TurnState{State: castv1.SessionState_SESSION_STATE_IDLE, ExitCode: 143, Abandoned: true})
	if len(msgs) != 0 {
		t.Fatalf("the parent heard of its worker whose turn a move stopped: %q; want nothing until the turn runs again and ends", msgs)
	}
}

// parentHears stores the worker's messages of kinds, reports its turn
// end ts and returns what its parent was told.
func parentHears(t *testing.T, ts fence.TurnState, kinds ...castv1.MessageKind) []*castv1.Message {
	t.Helper()
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parent, worker := parentAndWorker(ctx, t, s)
	for i, kind := range kinds {
		m := &castv1.Message{ClientId: ids.NewClientID(), Kind: kind, Text: fmt.Sprint("message ", i+1)}
		if _, err := s.Append(ctx, worker.Session.Id, []*castv1.Message{m}, fence.Guard{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := s.SetState(ctx, worker.Session.Id, fence.Guard{Node: "n1", Token: worker.Token}, ts)
	if err != nil {
		t.Fatal(err)
	}
	if err := moves.NotifyParent(ctx, s, w); err != nil {
		t.Fatal(err)
	}
	msgs, _, err := s.ListMessages(ctx, parent.Session.Id, 1, 0, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// A worker that goes idle with a user message its turns have not taken
// (sent while its last turn ran) runs again at once: its parent hears when
// the worker has nothing left to run, not at each turn's end. A worker no
// turn has delivered to (adopted history) is reported as before.
func TestNotifyParentWaitsForQueuedMessages(t *testing.T) {
	for _, tc := range []struct {
		name      string
		delivered int64
		want      int
	}{
		{"a message sent during the turn waits for the next", 1, 0},
		{"every message taken", 3, 1},
		{"nothing delivered by a turn yet", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := fence.TurnState{State: castv1.SessionState_SESSION_STATE_IDLE, DeliveredSeq: tc.delivered}
			user, answer := castv1.MessageKind_MESSAGE_KIND_USER, castv1.MessageKind_MESSAGE_KIND_ASSISTANT
			if msgs := parentHears(t, ts, user, answer, user); len(msgs) != tc.want {
				t.Fatalf("the parent heard %d times, want %d", len(msgs), tc.want)
			}
		})
	}
}
