package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// The delivery rule at the seams of threads, with real CLIs (claude,
// codex, pi), each probe a few turns:
//
//   - a pi worker finishes while its claude parent's turn was just
//     stopped by a switch to codex: codex answers the worker's notice
//     once, after the stopped message; the worker's next request holds
//     its task once;
//   - `cast merge` is refused while the parent's turn runs and while the
//     turn a switch stopped has not ended (the node held before its
//     outcome is recorded); after, codex's request holds the merged work
//     and the stopped message once each;
//   - a fork in its own worktree switched to codex during its first turn
//     (the control plane does not know the worktree yet) with a message
//     queued: codex runs it once, in the worktree; `cast worktree rm`
//     then moves the thread back to its checkout, and codex and claude
//     each hold every message once;
//   - `cast rm` of a worktree fork as its first turn is about to start:
//     nothing runs, the parent holds nothing of the fork, and a fork of
//     the removed one holds its unanswered message once;
//   - a control plane restart as a fork's first turn is about to record
//     its start: one request runs it, holding the history once.
func TestDeliveryAtThreadSeams(t *testing.T) {
	t.Parallel()
	dir, addr := filepath.Join(t.TempDir(), "etcd"), freeAddr(t)
	cb := func(c *controlplane.Config, _ string) { c.DataDir, c.Listen = dir, addr }
	r := newTurnRigWith(t, cb, "claude", "codex", "pi")
	ctx := context.Background()
	run := func(name string, f func(t *testing.T, m func(int) string)) {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			f(t, func(n int) string { return fmt.Sprintf("THR-%s-%d.", name, n) })
			t.Logf("%s: %s", name, time.Since(start).Round(time.Second))
		})
	}

	run("worker-parent-switch", func(t *testing.T, m func(int) string) {
		parent := r.create("claude", dmsg(m(1)))
		gate := make(chan struct{})
		r.fake.Enqueue(fakemodel.Reply{Text: "worker answer", Gate: gate})
		n := r.fake.TurnsStarted()
		w, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "pi", Model: "fake/fake-model", ParentId: parent, Text: dmsg(m(10))})
		must(t, err)
		waitTurns(t, r.fake, n+1) // the worker's turn held at the model
		s2, release := r.sendHeld(parent, dmsg(m(2)))
		r.switchTo(parent, "codex")
		r.waitStopped(parent, s2)
		release()
		close(gate)
		notice := "Worker " + w.Id + " (pi) finished"
		var seq int64
		testharness.WaitFor(t, 2*time.Minute, "the parent told its worker finished", func() bool {
			for _, msg := range r.messages(parent) {
				if msg.Kind == castv1.MessageKind_MESSAGE_KIND_USER && strings.Contains(msg.Text, notice) {
					seq = msg.Seq
					return true
				}
			}
			return false
		})
		r.waitDelivered(parent, "the parent answered its worker's notice", seq)
		req := requestWith(t, r.fake, notice)
		if req.API != fakemodel.Responses {
			t.Fatalf("the worker's notice ran on %s after the switch to codex", req.API)
		}
		assertDeliveredOnce(t, req, m(1), m(2), notice)
		noOldAgentAfterSwitch(t, r.messages(parent), "codex")
		s3 := r.send(parent, dmsg(m(3)))
		r.waitDelivered(parent, "the next message answered", s3)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(3)), m(1), m(2), notice, m(3))
		w11 := r.send(w.Id, dmsg(m(11)))
		r.waitDelivered(w.Id, "the worker's next message answered", w11)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(11)), m(10), m(11))
	})

	// A merge is refused while the parent's turn runs, and while the
	// turn a switch stopped has not ended (the node held before its
	// outcome is recorded); once it has, the merged work and the
	// stopped message reach the new agent's next request once each.
	run("merge-switch-midturn", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		fork, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: id, Agent: "pi", Model: "fake/fake-model"})
		must(t, err)
		f := r.send(fork.Id, dmsg(m(10)))
		r.waitDelivered(fork.Id, "the fork's message answered", f)
		r.stopAtTurnEnd()
		s2, release := r.sendHeld(id, dmsg(m(2)))
		if _, errOut, code := r.cast("", "merge", fork.Id); code == 0 || !strings.Contains(errOut, "is running a turn") {
			t.Fatalf("merge while the parent runs: exit %d: %s", code, errOut)
		}
		r.switchTo(id, "codex")
		release()
		r.waitStoppedAt("node.turn-before-outcome", "the stopped claude turn held before its end is recorded")
		if _, errOut, code := r.cast("", "merge", fork.Id); code == 0 || !strings.Contains(errOut, "is running a turn") {
			t.Fatalf("merge while the stopped turn has not ended: exit %d: %s", code, errOut)
		}
		r.node.Signal(syscall.SIGCONT)
		r.waitStopped(id, s2)
		noOldAgentAfterSwitch(t, r.messages(id), "codex") // the merged history is no agent's
		if out, errOut, code := r.cast("", "merge", fork.Id); code != 0 {
			t.Fatalf("merge after the switch: exit %d: %s%s", code, out, errOut)
		}
		s3 := r.send(id, dmsg(m(3)))
		r.waitDelivered(id, "the next message answered", s3)
		req := requestWith(t, r.fake, m(3))
		if req.API != fakemodel.Responses {
			t.Fatalf("the message after the switch ran on %s", req.API)
		}
		assertDeliveredOnce(t, req, m(1), m(2), m(3))
		// The merged work is history the agent reads (a user item of the
		// delta, or an assistant one of a rebuild), not a user message.
		if n := strings.Count(fmt.Sprint(req.Items), m(10)); n != 1 {
			t.Fatalf("codex's request holds the fork's message %d times:\n%s", n, clipItems(fmtItems(req.Items)))
		}
		answeredOn(t, r.messages(id), s3, "codex")
		r.node.Kill()
		r.startNode()
	})

	// worktreeFork is a claude session in a new git checkout, its first
	// message m(1) answered, and a fork of it in a worktree of its own.
	worktreeFork := func(t *testing.T, m func(int) string, branch string) (parent, fork, repo string) {
		repo = gitRepo(t)
		p, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: repo, Text: dmsg(m(1))})
		must(t, err)
		r.waitState(p.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
		f, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: p.Id, WorktreeBranch: branch})
		must(t, err)
		return p.Id, f.Id, repo
	}

	// A fork in its own worktree switched to codex while its first turn
	// runs (the control plane does not know the worktree yet) with a
	// message queued: codex runs the queued message once, in the
	// worktree.
	run("worktree-switch", func(t *testing.T, m func(int) string) {
		_, fork, repo := worktreeFork(t, m, "thr/wt-switch")
		_, release := r.sendHeld(fork, dmsg(m(2)))
		r.fake.Enqueue(fakemodel.Reply{Shell: "echo WT-PWD=$(pwd)"})
		s3 := r.send(fork, dmsg(m(3)))
		r.switchTo(fork, "codex")
		release()
		r.waitDelivered(fork, "the queued message answered on codex", s3)
		noOldAgentAfterSwitch(t, r.messages(fork), "codex")
		answeredOn(t, r.messages(fork), s3, "codex")
		req := requestWith(t, r.fake, m(3))
		if req.API != fakemodel.Responses {
			t.Fatalf("the queued message ran on %s", req.API)
		}
		assertDeliveredOnce(t, req, m(1), m(2), m(3))
		f, err := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: fork})
		must(t, err)
		if f.Cwd == repo || !strings.HasSuffix(f.Cwd, "wt-switch") {
			t.Fatalf("the fork's cwd after the switch is %s", f.Cwd)
		}
		pwd := ""
		for _, msg := range r.messages(fork) {
			if msg.Kind == castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT && msg.Seq > s3 {
				if _, after, ok := strings.Cut(msg.ToolResult.GetOutput(), "WT-PWD="); ok {
					pwd = strings.TrimSpace(after)
				}
			}
		}
		if real, _ := filepath.EvalSymlinks(f.Cwd); pwd != f.Cwd && pwd != real {
			t.Fatalf("codex ran in %q, not the fork's worktree %q", pwd, f.Cwd)
		}
		s4 := r.send(fork, dmsg(m(4)))
		r.waitDelivered(fork, "the next message", s4)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(4)), m(1), m(2), m(3), m(4))
		// The worktree removed: the thread works in its checkout again,
		// on a fresh native session holding every message once.
		if out, errOut, code := r.cast("", "worktree", "rm", f.Cwd); code != 0 {
			t.Fatalf("cast worktree rm: exit %d: %s%s", code, out, errOut)
		}
		s5 := r.send(fork, dmsg(m(5)))
		r.waitDelivered(fork, "the message after the worktree's removal", s5)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(5)), marksUpTo(m, 5)...)
		r.switchTo(fork, "claude")
		s6 := r.send(fork, dmsg(m(6)))
		r.waitDelivered(fork, "the message after the switch back", s6)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(6)), marksUpTo(m, 6)...)
		if g, err := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: fork}); err != nil || g.Cwd != repo {
			t.Fatalf("after the worktree's removal the fork works in %q, not %s (%v)", g.GetCwd(), repo, err)
		}
	})

	// `cast rm` of a worktree fork whose first turn is about to start
	// (the node held as it reports the start, its worktree made): the
	// turn does not run, the parent's next request holds nothing of the
	// fork, and a fork of the removed fork holds its unanswered message
	// once.
	run("worktree-rm-at-start", func(t *testing.T, m func(int) string) {
		parent, fork, _ := worktreeFork(t, m, "thr/wt-rm")
		r.stopAtNextTurnStart()
		n := len(r.fake.Turns())
		r.send(fork, dmsg(m(10)))
		r.waitStoppedAtTurnStart("the fork's first turn held before its start is recorded")
		if out, errOut, code := r.cast("", "rm", fork); code != 0 {
			t.Fatalf("cast rm of the fork whose turn has not started: exit %d: %s%s", code, out, errOut)
		}
		r.node.Signal(syscall.SIGCONT)
		// The store refuses the start: the turn ends failed, its
		// message held for good, before any CLI ran.
		s := r.waitState(fork, castv1.SessionState_SESSION_STATE_FAILED, 0)
		t.Logf("the removed fork: %v %q", s.State, s.StateReason)
		for _, req := range r.fake.Turns()[n:] {
			if strings.Contains(userText(req), m(10)) {
				t.Errorf("a %s request after the fork was removed holds its message", req.API)
			}
		}
		s2 := r.send(parent, dmsg(m(2)))
		r.waitDelivered(parent, "the parent's next message", s2)
		req := requestWith(t, r.fake, m(2))
		assertDeliveredOnce(t, req, m(1), m(2))
		if strings.Contains(userText(req), m(10)) {
			t.Fatal("the parent's request holds the removed fork's message")
		}
		again, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: fork, Agent: "codex"})
		must(t, err)
		f := r.send(again.Id, dmsg(m(11)))
		r.waitDelivered(again.Id, "the fork of the removed fork answered", f)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(11)), m(1), m(10), m(11))
		r.node.Kill()
		r.startNode()
	})

	// restartCP stops the control plane and starts another on its data.
	restartCP := func() {
		r.srv.Stop()
		r.srv = testharness.StartControlPlane(t, func(c *controlplane.Config) { cb(c, r.fake.URL) })
	}

	// The fork's first message sent, the node held as that turn is about
	// to report its start, and the control plane restarted there.
	run("fork-restart-at-start", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		fork, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: id, Agent: "claude"})
		must(t, err)
		r.stopAtNextTurnStart()
		n := len(r.fake.Turns())
		f := r.send(fork.Id, dmsg(m(10)))
		r.waitStoppedAtTurnStart("the fork's first turn held before its start is recorded")
		restartCP()
		r.node.Signal(syscall.SIGCONT)
		r.waitDelivered(fork.Id, "the fork's first message", f)
		k := 0
		for _, req := range r.fake.Turns()[n:] {
			if strings.Contains(fakemodel.LastUserText(req.Items), m(10)) {
				k++
			}
		}
		if k != 1 {
			t.Errorf("%d model requests were started by the fork's first message, want 1", k)
		}
		assertDeliveredOnce(t, requestWith(t, r.fake, m(10)), m(1), m(10))
		f2 := r.send(fork.Id, dmsg(m(11)))
		r.waitDelivered(fork.Id, "the fork's next message", f2)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(11)), m(1), m(10), m(11))
		r.node.Kill()
		r.startNode()
	})
}
