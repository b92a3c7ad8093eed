package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/fakemodel"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// kill9Cases are the phase boundaries a real process is killed at (with
// SIGKILL, by a failpoint inside it): the control plane after each of the
// migration's txns, the source node after its export, the destination after
// its import but before it reported.
var kill9Cases = []struct{ name, proc, point string }{
	{"controlplane after fence", "controlplane", "migrate.after-fence"},
	{"controlplane after drain", "controlplane", "migrate.after-drain"},
	{"controlplane after worktree", "controlplane", "migrate.after-worktree"},
	{"controlplane after commit", "controlplane", "migrate.after-commit"},
	{"source after export", "laptop", "node.after-export"},
	{"destination after import", "linux", "node.after-import"},
}

// After a kill -9 at any phase boundary and a restart, the migration either
// completes or rolls back; the session has one owner matching the outcome
// and no fence; every acknowledged message is in the transcript once and is
// answered in exactly one turn, on the owner.
func TestMigrateSurvivesKill9AtEachPhase(t *testing.T) {
	t.Parallel()
	for _, tc := range kill9Cases {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"CAST_FAILPOINTS=" + tc.point}
			opts := migOpts{cpProcess: true, nodeEnv: map[string][]string{}}
			if tc.proc == "controlplane" {
				opts.cpEnv = env
			} else {
				opts.nodeEnv[tc.proc] = env
			}
			r := newMigRig(t, opts, "claude")
			ctx := context.Background()
			repo := r.repo("laptop", "w")
			s, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: repo, Node: "laptop", Text: "first question"})
			if err != nil {
				t.Fatal(err)
			}
			r.waitSession("first turn done", s.Id, func(s *castv1.Session) bool {
				return s.State == castv1.SessionState_SESSION_STATE_IDLE && s.LastSeq >= 2
			})
			rec := newRecorder()
			stop := make(chan struct{})
			observed := make(chan struct{})
			go func() { defer close(observed); rec.observe(r.c, s.Id, stop) }()
			migCall := rec.now()
			start := &castv1.StartMigrationRequest{To: "linux", SessionIds: []string{s.Id}, RequestId: "fault-move"}
			m, err := r.c.Migrations.StartMigration(ctx, start)
			if err != nil && status.Code(err) != codes.Unavailable {
				t.Fatal(err)
			}
			// Unavailable: the control plane died at its failpoint before
			// answering (an idle session reaches it at once), so the start's
			// outcome is unknown; the same request id after the restart
			// returns the migration if it was recorded, else starts it.
			// Sent while the move is under way; it keeps retrying through the
			// crash and is acknowledged once.
			during := make(chan error, 1)
			go func() { during <- r.trySend(rec, s.Id, "during-move") }()
			victim := r.cp
			if tc.proc != "controlplane" {
				victim = r.nodes[tc.proc]
			}
			if _, ok := victim.Wait(90 * time.Second); !ok {
				t.Fatalf("%s never reached failpoint %s", tc.proc, tc.point)
			}
			if tc.proc == "controlplane" {
				r.startControlPlane(nil)
			} else {
				r.startNode(tc.proc, nil)
			}
			if err := <-during; err != nil {
				t.Fatal(err)
			}
			if err := r.trySend(rec, s.Id, "after-restart"); err != nil {
				t.Fatal(err)
			}
			acked := []string{"during-move", "after-restart"}
			if m == nil {
				m = r.retryStart(start)
			}

			final := r.waitMigration(m.Id)
			rec.add(0, histIn{Kind: histMigrate, To: "linux"}, histOut{Succeeded: final.State == castv1.MigrationState_MIGRATION_STATE_SUCCEEDED}, migCall)
			sess := r.session(s.Id)
			want := map[castv1.MigrationState]string{castv1.MigrationState_MIGRATION_STATE_SUCCEEDED: "linux", castv1.MigrationState_MIGRATION_STATE_FAILED: "laptop"}[final.State]
			if want == "" || sess.Node != want || sess.FencedBy != "" {
				t.Fatalf("migration %v (%s): session on %q fenced %q; want it on %q, unfenced", final.State, final.Sessions[0].Reason, sess.Node, sess.FencedBy, want)
			}
			t.Logf("outcome: %v on %s (%s)", final.State, sess.Node, final.Sessions[0].Reason)
			r.assertAnsweredOnce(s.Id, acked)
			close(stop)
			<-observed
			rec.check(t, histModel("laptop", map[string]int64{"first question": 1}))
		})
	}
}

// trySend sends text with a request id, retrying through a restart until
// the control plane acknowledges it (a retry never stores it twice).
// The whole retry loop is one operation in rec's history.
func (r *migRig) trySend(rec *recorder, id, text string) error {
	rid := "send-" + text
	call := rec.now()
	var err error
	for range 120 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var resp *castv1.SendMessageResponse
		resp, err = r.c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: id, Text: text, RequestId: rid})
		cancel()
		if err == nil {
			rec.add(1, histIn{Kind: histSend, Text: text}, histOut{Seq: resp.Message.Seq}, call)
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("send %q never acknowledged: %w", text, err)
}

// retryStart repeats a start whose answer was lost, until the control
// plane answers (the request id makes it return the same migration).
func (r *migRig) retryStart(req *castv1.StartMigrationRequest) *castv1.Migration {
	r.t.Helper()
	var err error
	for range 60 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var m *castv1.Migration
		m, err = r.c.Migrations.StartMigration(ctx, req)
		cancel()
		if err == nil {
			return m
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.t.Fatalf("start migration never answered: %v", err)
	return nil
}

// waitMigration polls through restarts until the migration ends.
func (r *migRig) waitMigration(id string) *castv1.Migration {
	r.t.Helper()
	var m *castv1.Migration
	testharness.WaitFor(r.t, 3*time.Minute, "migration "+id+" to end", func() bool {
		got, err := r.c.Migrations.GetMigration(context.Background(), &castv1.GetMigrationRequest{Id: id})
		if err != nil {
			return false
		}
		m = got
		s := m.State
		return s == castv1.MigrationState_MIGRATION_STATE_SUCCEEDED || s == castv1.MigrationState_MIGRATION_STATE_FAILED ||
			s == castv1.MigrationState_MIGRATION_STATE_CANCELLED
	})
	return m
}

// assertAnsweredOnce checks each text is stored once and reached the model
// as (part of) the newest user message of exactly one turn.
func (r *migRig) assertAnsweredOnce(id string, texts []string) {
	r.t.Helper()
	var lastSeq int64
	count := map[string]int{}
	for _, m := range r.messages(id) {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER {
			count[m.Text]++
			lastSeq = max(lastSeq, m.Seq)
		}
	}
	for _, text := range texts {
		if count[text] != 1 {
			r.t.Fatalf("acknowledged %q is stored %d times, want once", text, count[text])
		}
	}
	r.waitSession("acknowledged messages answered", id, func(s *castv1.Session) bool {
		return s.State == castv1.SessionState_SESSION_STATE_IDLE && s.DeliveredSeq >= lastSeq
	})
	for _, text := range texts {
		if n := countTurnsWith(r.fake, text); n != 1 {
			var b strings.Builder
			for _, req := range r.fake.Turns() {
				if k := len(req.Items); k > 0 {
					fmt.Fprintf(&b, "  %q\n", req.Items[k-1].Text)
				}
			}
			r.t.Fatalf("%q reached the model in %d turns, want 1; newest user texts:\n%s", text, n, b.String())
		}
	}
}

// agentPIDs lists the processes running for a session (the node gives
// every agent CAST_SESSION in its environment).
func agentPIDs(sessionID string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(env, []byte("CAST_SESSION="+sessionID+"\x00")) {
			out = append(out, pid)
		}
	}
	return out
}

// slowTurnOnLaptop starts a claude session on laptop whose first answer
// the model holds back for delay, and returns once the agent waits on it.
func (r *migRig) slowTurnOnLaptop(prompt, answer string, delay time.Duration) *castv1.Session {
	r.t.Helper()
	r.fake.Enqueue(fakemodel.Reply{Text: answer, Delay: delay})
	s, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: r.repo("laptop", "w"), Node: "laptop", Text: prompt})
	if err != nil {
		r.t.Fatal(err)
	}
	r.waitSession("turn running", s.Id, inState(castv1.SessionState_SESSION_STATE_RUNNING))
	testharness.WaitFor(r.t, 30*time.Second, "the agent waiting on the model", func() bool { return r.fake.TurnsStarted() > 0 })
	return s
}

// A node cut off from the control plane for longer than its lease minus a
// margin stops its agents by itself (etcd fences writes, not processes);
// the abandoned prompt runs again once the node is back, answered once.
func TestNodeSelfFencesWhenCutOff(t *testing.T) {
	r := newMigRig(t, migOpts{cpProcess: true, shortLease: true}, "claude")
	s := r.slowTurnOnLaptop("long job", "too late", 90*time.Second)
	r.cp.Kill()
	testharness.WaitFor(t, 15*time.Second, "agent stopped by the cut-off node", func() bool { return len(agentPIDs(s.Id)) == 0 })
	if !strings.Contains(r.nodes["laptop"].Output(), "stopped running agents") {
		t.Fatal("the node did not say it stopped its agents")
	}
	r.startControlPlane(nil)
	sess := r.waitSession("prompt rerun once back", s.Id, func(s *castv1.Session) bool {
		return s.State == castv1.SessionState_SESSION_STATE_IDLE && s.DeliveredSeq >= 1 && s.LastSeq >= 2
	})
	if sess.Node != "laptop" {
		t.Fatalf("owner = %q", sess.Node)
	}
	var answers []string
	for _, m := range r.messages(s.Id) {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT {
			answers = append(answers, m.Text)
		}
	}
	if len(answers) != 1 || strings.Contains(answers[0], "too late") {
		t.Fatalf("answers = %q, want the rerun's one answer", answers)
	}
}

// A laptop that slept through a migration (its node and agent frozen past
// the lease) wakes to find the session gone: it stops the agent, and the
// late answer it was waiting for never reaches the transcript.
func TestStaleOwnerStopsAfterSleepingThroughMove(t *testing.T) {
	r := newMigRig(t, migOpts{cpProcess: true, shortLease: true}, "claude")
	ctx := context.Background()
	s := r.slowTurnOnLaptop("question before sleep", "stale laptop answer", 20*time.Second)
	// The lid closes: the node and its agent freeze.
	frozen := append(agentPIDs(s.Id), r.nodes["laptop"].Cmd.Process.Pid)
	for _, pid := range frozen {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	testharness.WaitFor(t, 30*time.Second, "laptop marked down", func() bool {
		resp, err := r.c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
		for _, n := range resp.GetNodes() {
			if n.Name == "laptop" {
				return err == nil && !n.Connected
			}
		}
		return false
	})
	// Its work tree cannot be read while it sleeps: move the conversation.
	m, err := r.c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "linux", SessionIds: []string{s.Id}, SkipWorktree: true})
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.MkdirAll(filepath.Join(r.roots["linux"], "w"), 0o755))
	if final := r.waitMigration(m.Id); final.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		t.Fatalf("migration %v: %s", final.State, final.Sessions[0].Reason)
	}
	// The lid opens.
	for _, pid := range frozen {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	testharness.WaitFor(t, 30*time.Second, "stale agent stopped", func() bool {
		for _, pid := range agentPIDs(s.Id) {
			if pid != r.nodes["laptop"].Cmd.Process.Pid {
				return false
			}
		}
		return true
	})
	r.waitSession("prompt answered on linux", s.Id, func(s *castv1.Session) bool {
		return s.Node == "linux" && s.State == castv1.SessionState_SESSION_STATE_IDLE && s.LastSeq >= 3
	})
	time.Sleep(12 * time.Second) // past the stale answer's delay (counted from the request)
	for _, msg := range r.messages(s.Id) {
		if strings.Contains(msg.Text, "stale laptop answer") {
			t.Fatalf("the stale owner's answer reached the transcript: #%d %q", msg.Seq, msg.Text)
		}
	}
	if out := r.nodes["laptop"].Output(); !strings.Contains(out, "session released") {
		t.Errorf("laptop never released the session:\n%s", out)
	}
}
