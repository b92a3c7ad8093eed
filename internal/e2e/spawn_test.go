package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A worker spawned on pi runs its task with no shared history; when it
// finishes, the parent (on Claude Code) gets a message and its agent is
// woken with it. A worker on Cursor (not installable here) is blocked, and
// the parent hears that too. Workers stay out of the default listing.
func TestSpawnWorkerWakesParent(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "pi", "cursor")
	ctx := context.Background()
	parent, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "plan the work MARK-PARENT"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	worker, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "pi", Model: "fake/fake-model", ParentId: parent.Id, Text: "count the files MARK-TASK"})
	if err != nil {
		t.Fatal(err)
	}
	if !worker.Subagent || worker.ParentId != parent.Id || worker.Cwd != parent.Cwd || worker.Node != parent.Node {
		t.Fatalf("worker %+v", worker)
	}
	w := r.waitState(worker.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	if msgs := r.messages(worker.Id); strings.Contains(kinds(msgs), "tool") || int64(len(msgs)) != w.LastSeq {
		t.Fatalf("worker transcript: %s", kinds(msgs))
	}
	// No shared history: the worker's model saw only its task.
	for _, req := range r.fake.Turns() {
		if req.API == "chat" {
			for _, it := range req.Items {
				if strings.Contains(it.Text, "MARK-PARENT") {
					t.Fatal("the worker saw its parent's history")
				}
			}
		}
	}
	// The parent is told and woken: its agent answers the notification.
	testharness.WaitFor(t, 2*time.Minute, "parent woken by its worker", func() bool {
		for _, req := range r.fake.Turns() {
			if req.API != "anthropic" {
				continue
			}
			for _, it := range req.Items {
				if strings.Contains(it.Text, "Worker "+worker.Id+" (pi) finished") {
					return true
				}
			}
		}
		return false
	})

	blocked, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "cursor", ParentId: parent.Id, Text: "try cursor"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(blocked.Id, castv1.SessionState_SESSION_STATE_FAILED, 0)
	testharness.WaitFor(t, time.Minute, "parent told the worker is blocked", func() bool {
		for _, m := range r.messages(parent.Id) {
			if strings.Contains(m.Text, "Worker "+blocked.Id+" (Cursor) is blocked") {
				return true
			}
		}
		return false
	})

	list, err := r.c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Id != parent.Id {
		t.Fatalf("default listing shows workers: %v %v", list, err)
	}
	all, _ := r.c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{IncludeSubagents: true})
	if len(all.Sessions) != 3 {
		t.Fatalf("listing with workers: %d sessions", len(all.Sessions))
	}
}
