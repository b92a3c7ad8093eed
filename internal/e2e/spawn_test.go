package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
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

	queuedTurnsNotifyOnce(t, r, parent.Id, worker.Id)

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

// queuedTurnsNotifyOnce: two messages to a busy worker run as two turns
// (the second waits for the first to end); the parent hears once, when
// the worker has nothing left to run, with the second turn's answer. It
// heard "finished" after the first turn too, while its worker went on.
func queuedTurnsNotifyOnce(t *testing.T, r *turnRig, parentID, workerID string) {
	t.Helper()
	gate, reached, once := make(chan struct{}), make(chan struct{}), sync.Once{}
	r.fake.SetPolicy(func(req fakemodel.Request) fakemodel.Reply {
		switch u := fakemodel.LastUserText(req.Items); {
		case strings.Contains(u, "MARK-Q1"):
			once.Do(func() { close(reached) })
			return fakemodel.Reply{Text: "the first answer", Gate: gate}
		case strings.Contains(u, "MARK-Q2"):
			return fakemodel.Reply{Text: "the second answer MARK-A2"}
		}
		return fakemodel.Reply{Text: "noted"}
	})
	r.send(workerID, "first task MARK-Q1")
	select {
	case <-reached:
	case <-time.After(2 * time.Minute):
		t.Fatal("the worker's first turn did not reach the model")
	}
	seq := r.send(workerID, "second task MARK-Q2")
	close(gate)
	r.waitState(workerID, castv1.SessionState_SESSION_STATE_IDLE, seq)
	var seen []string
	finished := func() (n int, last string) {
		seen = nil
		for _, m := range r.messages(parentID) {
			if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER && strings.Contains(m.Text, "Worker "+workerID+" (pi) finished") {
				n, last = n+1, m.Text
				seen = append(seen, fmt.Sprintf("seq %d client id %s: %q", m.Seq, m.ClientId, m.Text))
			}
		}
		return n, last
	}
	testharness.WaitFor(t, time.Minute, "parent told of the second turn", func() bool {
		_, last := finished()
		return strings.Contains(last, "MARK-A2")
	})
	// One notice for the worker's first task (above), one for the two
	// queued turns.
	if n, _ := finished(); n != 2 {
		t.Fatalf("the parent heard %d times that its worker finished, want 2:\n%s", n, strings.Join(seen, "\n"))
	}
}

// A worker removed (`cast rm`) as its node was about to start a turn for
// it has its start refused (SESSION_ARCHIVED) and ends failed, the prompt
// held for good; its parent is not woken for it. It was told its worker
// "is blocked", and its agent ran a turn on a worker nobody can reach.
func TestRemovedWorkerDoesNotWakeItsParent(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "pi")
	ctx := context.Background()
	parent, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "plan the work"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	worker, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "pi", Model: "fake/fake-model", ParentId: parent.Id, Text: "count the files"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(worker.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	var notice int64
	testharness.WaitFor(t, 2*time.Minute, "parent told its worker finished", func() bool {
		for _, m := range r.messages(parent.Id) {
			if strings.Contains(m.Text, "Worker "+worker.Id+" (pi) finished") {
				notice = m.Seq
				return true
			}
		}
		return false
	})
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, notice)

	r.stopAtNextTurnStart()
	seq := r.send(worker.Id, "one more thing")
	r.waitStoppedAtTurnStart("the worker's turn about to report its start")
	if _, err := r.c.Sessions.DeleteSession(ctx, &castv1.DeleteSessionRequest{SessionId: worker.Id}); err != nil {
		t.Fatalf("archive the idle worker: %v", err)
	}
	before := r.messages(parent.Id)
	r.node.Signal(syscall.SIGCONT)
	r.waitState(worker.Id, castv1.SessionState_SESSION_STATE_FAILED, seq-1)
	// The failed report (and its observers) returned before the node
	// logs the turn's failure.
	testharness.WaitFor(t, time.Minute, "the node ended the worker's refused turn", func() bool {
		for _, line := range strings.Split(r.node.Output(), "\n") {
			if strings.Contains(line, "turn failed") && strings.Contains(line, worker.Id) {
				return true
			}
		}
		return false
	})
	if after := r.messages(parent.Id); len(after) != len(before) {
		t.Fatalf("the parent was told of its removed worker: %q", after[len(before):])
	}
}

// A worker spawned while its parent's first turn runs in a worktree of its
// own (the control plane learns the worktree only when that turn ends)
// runs beside its parent, in that worktree. It ran in the checkout the
// parent's worktree came from: the stored cwd then, so the worker edited
// the checkout its parent had left (another thread's, perhaps).
func TestWorkerSpawnedInItsParentsFirstTurnRunsInItsWorktree(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "pi")
	parent, repo, release := inFirstWorktreeTurn(t, r, "thr/spawn-wt")
	// What `cast spawn` in the parent's turn asks (no --cwd, no --node).
	worker, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "pi", Model: "fake/fake-model", ParentId: parent, Text: "count the files"})
	if err != nil {
		t.Fatal(err)
	}
	w := r.waitState(worker.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	p := release()
	if w.Cwd != p.Cwd || p.Cwd == repo {
		t.Fatalf("the worker ran in %s, not in its parent's worktree %s (checkout %s)", w.Cwd, p.Cwd, repo)
	}
}

// A worker whose agent asks a permission (Claude Code asking `cast mcp`)
// tells its parent it waits on one, as `cast spawn` promises. The request
// set the worker waiting outside a turn report, so its parent heard
// nothing and the worker waited on a person nobody had told.
func TestWorkerWaitingOnAPermissionTellsItsParent(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "pi")
	settings := filepath.Join(agenttest.NativeHome(r.homes["claude"], "claude"), "settings.json")
	if err := os.WriteFile(settings, []byte(`{"permissions":{"ask":["Bash(touch:*)"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	parent, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "pi", Model: "fake/fake-model", Cwd: t.TempDir(), Text: "plan the work"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(parent.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	worker, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", ParentId: parent.Id, Text: "TOOLCALL CMD[touch asked.txt]"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(worker.Id, castv1.SessionState_SESSION_STATE_WAITING_PERMISSION, 0)
	testharness.WaitFor(t, time.Minute, "parent told its worker waits on a permission", func() bool {
		for _, m := range r.messages(parent.Id) {
			if strings.Contains(m.Text, "Worker "+worker.Id+" (") && strings.Contains(m.Text, "waits on a permission: permission for Bash") {
				return true
			}
		}
		return false
	})
}
