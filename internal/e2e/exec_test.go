package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// `cast exec` runs one-shot turns on a node with the real CLIs: the answer
// is printed, the exit code is the agent's, -j runs prompts in parallel,
// --chain feeds each answer into the next prompt, piped stdin is read, and
// none of it shows in `cast ls`.
func TestExecOneShot(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "codex")
	bin := filepath.Join(testharness.Binaries(t), "cast")
	cwd := t.TempDir()
	run := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		return testharness.RunInput(t, []string{"CAST_ADDR=" + r.addr}, strings.NewReader(stdin), 3*time.Minute, bin, append([]string{"exec", "--cwd", cwd}, args...)...)
	}

	out, errOut, code := run("", "--agent", "claude", "say hi MARK-E1")
	if code != 0 || !strings.Contains(out, "MARK-E1") || !regexp.MustCompile(`^session [0-9a-z-]+ on node worker\n$`).MatchString(errOut) {
		t.Fatalf("exec claude: exit %d, out %q, err %q; want the answer, and where it ran on stderr as cast new says it", code, out, errOut)
	}
	out, _, code = run("", "--agent", "codex", "-j", "2", "first MARK-J1", "second MARK-J2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], "MARK-J1") || !strings.Contains(lines[1], "MARK-J2") {
		t.Fatalf("exec -j 2: exit %d, out %q", code, out)
	}
	out, _, code = run("", "--agent", "claude", "--chain", "step one MARK-S1", "step two MARK-S2")
	if code != 0 || !strings.Contains(out, "MARK-S2") {
		t.Fatalf("exec --chain: exit %d, out %q", code, out)
	}
	turns := r.fake.Turns()
	assertItems(t, turns[len(turns)-1].Items, "MARK-S2\n\nFAKE-ANSWER") // step one's answer is piped into step two
	out, _, code = run("piped text MARK-IN", "--agent", "claude", "summarize MARK-P")
	if code != 0 || !strings.Contains(out, "MARK-IN") {
		t.Fatalf("exec with stdin: exit %d, out %q", code, out)
	}
	_, errOut, code = run("", "--agent", "cursor", "hello")
	if code == 0 || !strings.Contains(errOut, "no connected node has the cursor CLI") {
		t.Fatalf("exec on a missing CLI: exit %d, err %q", code, errOut)
	}
	// --dry-run prints the exact command line for every agent and runs
	// nothing; the five real CLIs read the prompt on stdin, never argv.
	dry := map[string]string{
		"claude": "claude -p --session-id ", "codex": "codex exec --skip-git-repo-check --json -",
		"gemini": "gemini --session-id ", "pi": "pi --session ", "opencode": "opencode run --format json",
		"grok": "grok -p 'hello world'", "cursor": "cursor-agent -p 'hello world' --output-format stream-json",
		"muse": "muse exec --json 'hello world'",
	}
	turnsBefore := len(r.fake.Turns())
	for agent, prefix := range dry {
		out, errOut, code := run("", "--agent", agent, "--dry-run", "hello world")
		onStdin := strings.HasPrefix(out, "printf %s 'hello world' | ") && strings.Count(out, "hello world") == 1
		if code != 0 || !strings.Contains(out, prefix) || !strings.Contains(out, "hello world") || onStdin != !strings.Contains(prefix, "hello world") {
			t.Errorf("exec --dry-run --agent %s: exit %d, out %q, err %q", agent, code, out, errOut)
		}
	}
	if len(r.fake.Turns()) != turnsBefore {
		t.Error("--dry-run reached the model")
	}
	list, err := r.c.Sessions.ListSessions(context.Background(), &castv1.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 0 {
		t.Fatalf("exec sessions listed: %v %v", list, err)
	}
}

// `cast exec --resume` on a session whose last turn failed answers with
// the new turn: the failure its watch first shows, still the session's
// state until the node starts the turn, is the earlier turn's. exec used
// to take it for the new turn's and exit with the old failure at once.
func TestExecResumeAfterAFailedTurn(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	bin := filepath.Join(testharness.Binaries(t), "cast")
	cwd := t.TempDir()
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return testharness.RunInput(t, []string{"CAST_ADDR=" + r.addr}, strings.NewReader(""), 3*time.Minute, bin, append([]string{"exec", "--cwd", cwd}, args...)...)
	}
	r.fake.FailNext(1, 400) // not retried: the turn fails
	_, errOut, code := run("--agent", "claude", "first MARK-R1")
	id := regexp.MustCompile(`^session ([0-9a-z-]+) on node worker\n`).FindStringSubmatch(errOut)
	if code == 0 || id == nil || !strings.Contains(errOut, "injected failure") {
		t.Fatalf("the failing turn: exit %d, err %q; want it failed, and where it ran", code, errOut)
	}
	out, errOut, code := run("--resume", id[1], "second MARK-R2")
	if code != 0 || !strings.Contains(out, "MARK-R2") {
		t.Fatalf("exec --resume after a failed turn: exit %d, out %q, err %q; want the new turn's answer", code, out, errOut)
	}
}

// `cast exec --resume` whose turn someone else stops (`cast interrupt`, or
// the interrupt a switch to another agent makes) exits 130 and says the
// turn was interrupted: it exited with the CLI's death by the node's
// signal (143) and no word why, and a node that reported exit 0 for an
// interrupt (7d1320c, reverted) had it exit 0 with a partial answer, which
// a script takes for success. `cast get` then shows the last turn
// interrupted, in text and JSON, not a last error ("exit 143"), until the
// next turn ends; and that turn's request carries the interrupted prompt
// once.
func TestExecResumeOfAnInterruptedTurn(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "codex")
	for _, how := range []string{"interrupt", "switch"} {
		t.Run(how, func(t *testing.T) {
			m := func(n int) string { return fmt.Sprintf("MARK-EXI-%s-%d", how, n) }
			id := r.create("claude", dmsg(m(1)))
			gate := make(chan struct{})
			defer close(gate)
			r.fake.Enqueue(fakemodel.Reply{Text: "held answer", Gate: gate})
			n := r.fake.TurnsStarted()
			done := inBackground(func() (string, string, int) { return r.cast("", "exec", "--resume", id, dmsg(m(2))) })
			testharness.WaitFor(t, 2*time.Minute, "the resumed turn's request reaches the model", func() bool { return r.fake.TurnsStarted() > n })
			var stop []string
			if how == "interrupt" {
				stop = []string{"interrupt", id}
			} else {
				stop = []string{"switch", id, "--agent", "codex"}
			}
			if out, errOut, code := r.cast("", stop...); code != 0 {
				t.Fatalf("cast %s: exit %d, out %q, err %q", strings.Join(stop, " "), code, out, errOut)
			}
			var res cmdResult
			select {
			case res = <-done:
			case <-time.After(3 * time.Minute):
				t.Fatal("cast exec --resume did not end after its turn was interrupted")
			}
			if res.code != 130 || !strings.Contains(res.errOut, "interrupted") || strings.TrimSpace(res.out) != "" {
				t.Fatalf("exec --resume of an interrupted turn: exit %d, out %q, err %q; want exit 130 saying it was interrupted, and no answer", res.code, res.out, res.errOut)
			}

			out, errOut, code := r.cast("", "get", id)
			if code != 0 || !regexp.MustCompile(`(?m)^last turn:\s+interrupted$`).MatchString(out) || strings.Contains(out, "last error") {
				t.Fatalf("cast get after the interrupt: exit %d, err %q, out:\n%s\nwant \"last turn: interrupted\" and no last error", code, errOut, out)
			}
			out, _, code = r.cast("", "get", id, "-o", "json")
			var got map[string]any
			if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
				t.Fatalf("cast get -o json: exit %d, %v, out %q", code, err, out)
			}
			// The exit code stays the CLI's death by the signal, so a client
			// that does not read last_turn_interrupted sees no success.
			if got["last_turn_interrupted"] != true || got["last_exit_code"] == nil {
				t.Fatalf("cast get -o json after the interrupt: last_turn_interrupted %v, last_exit_code %v; want true and the signal's exit code", got["last_turn_interrupted"], got["last_exit_code"])
			}

			seq := r.send(id, dmsg(m(3)))
			r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
			assertDeliveredOnce(t, requestWith(t, r.fake, m(3)), m(1), m(2), m(3))
			if out, _, _ := r.cast("", "get", id); strings.Contains(out, "last turn") || strings.Contains(out, "last error") {
				t.Fatalf("cast get after a turn that ran to its end still shows the interrupt:\n%s", out)
			}
		})
	}
}

// `cast exec --resume` on a session running a turn prints the answer to
// its own prompt, which runs once that turn ends: it printed the running
// turn's answer (exit 0) and left before its prompt had run.
func TestExecResumeOnARunningSession(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	gate := make(chan struct{})
	r.fake.SetPolicy(func(req fakemodel.Request) fakemodel.Reply {
		switch u := fakemodel.LastUserText(req.Items); {
		case strings.Contains(u, "MARK-SLOW"):
			return fakemodel.Reply{Text: "the earlier turn's answer", Gate: gate}
		case strings.Contains(u, "MARK-E"):
			return fakemodel.Reply{Text: "the exec prompt's answer"}
		}
		return fakemodel.Reply{Text: "first answer"}
	})
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "start"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	seq := r.send(sess.Id, "a long turn MARK-SLOW")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_RUNNING, seq-1)
	done := inBackground(func() (string, string, int) {
		return testharness.RunInput(t, []string{"CAST_ADDR=" + r.addr}, strings.NewReader(""), 3*time.Minute,
			filepath.Join(testharness.Binaries(t), "cast"), "exec", "--resume", sess.Id, "then this MARK-E")
	})
	testharness.WaitFor(t, time.Minute, "exec's prompt stored", func() bool {
		msgs := r.messages(sess.Id)
		return msgs[len(msgs)-1].Text == "then this MARK-E"
	})
	close(gate)
	got := <-done
	if got.code != 0 || got.out != "the exec prompt's answer\n" {
		t.Fatalf("exec --resume on a running session: exit %d, out %q, err %q; want only its own prompt's answer", got.code, got.out, got.errOut)
	}
}

// `cast exec --resume` whose turn a migration stops (its --wait ran out)
// keeps waiting and answers with the turn that runs the prompt again on
// the destination, exit 0: it exited 143 at the source's report of the
// CLI's death by the node's signal, which is no end of the prompt's turn.
// Until the destination's turn ends, `cast get` shows no last error (it
// showed "exit 143" through the turn on the destination), and the
// destination's request carries the prompt once.
func TestExecResumeAcrossAMigration(t *testing.T) {
	t.Parallel()
	r := newMigRig(t, migOpts{}, "claude")
	m := func(n int) string { return fmt.Sprintf("MARK-EXM-%d", n) }
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: r.repo("laptop", "a"), Node: "laptop", Text: dmsg(m(1))})
	if err != nil {
		t.Fatal(err)
	}
	id := sess.Id
	r.waitSession("first turn answered on laptop", id, func(s *castv1.Session) bool {
		return s.State == castv1.SessionState_SESSION_STATE_IDLE && s.LastSeq >= 2
	})
	onSource, onDest := make(chan struct{}), make(chan struct{})
	defer close(onSource)
	r.fake.Enqueue(fakemodel.Reply{Text: "source answer, never given", Gate: onSource}, fakemodel.Reply{Text: "DEST-ANSWER", Gate: onDest})
	n := r.fake.TurnsStarted()
	done := inBackground(func() (string, string, int) {
		return testharness.RunInput(t, r.cast.env, strings.NewReader(""), 5*time.Minute, r.cast.bin, "exec", "--resume", id, dmsg(m(2)))
	})
	testharness.WaitFor(t, 2*time.Minute, "the resumed turn's request reaches the model on laptop", func() bool { return r.fake.TurnsStarted() > n })
	r.cast.must("migrate", "start", "--to", "linux", "--wait", "1s", id)
	testharness.WaitFor(t, 3*time.Minute, "the prompt's turn runs again on linux", func() bool { return r.fake.TurnsStarted() > n+1 })
	select {
	case res := <-done:
		t.Fatalf("cast exec --resume ended when the move stopped its turn: exit %d, out %q, err %q; want it to wait for the turn on linux", res.code, res.out, res.errOut)
	default:
	}
	if out, errOut, code := r.cast.run("get", id); code != 0 || strings.Contains(out, "last error") || strings.Contains(out, "last turn") {
		t.Fatalf("cast get while the prompt runs again on linux: exit %d, err %q, out:\n%s\nwant no last error and no last turn", code, errOut, out)
	}
	close(onDest)
	var res cmdResult
	select {
	case res = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("cast exec --resume did not end after the turn on linux")
	}
	if res.code != 0 || strings.TrimSpace(res.out) != "DEST-ANSWER" {
		t.Fatalf("exec --resume across a migration: exit %d, out %q, err %q; want exit 0 and the answer given on linux", res.code, res.out, res.errOut)
	}
	if s := r.session(id); s.Node != "linux" || s.LastExitCode != 0 || s.LastTurnInterrupted {
		t.Fatalf("session after the move: node %q, last exit code %d, interrupted %v", s.Node, s.LastExitCode, s.LastTurnInterrupted)
	}
	assertDeliveredOnce(t, requestWith(t, r.fake, m(2)), m(1), m(2))
}

// cmdResult is what a cast command printed and its exit code.
type cmdResult struct {
	out, errOut string
	code        int
}

// inBackground runs a cast command on a goroutine of its own; its result
// comes on the channel.
func inBackground(run func() (string, string, int)) <-chan cmdResult {
	done := make(chan cmdResult, 1)
	go func() {
		out, errOut, code := run()
		done <- cmdResult{out, errOut, code}
	}()
	return done
}

// `cast exec --resume` sent while a turn runs that then fails dropping its
// prompt (the model refused it: 400; the next message runs without it):
// exec's prompt runs in the next turn, and exec prints its answer. It
// took the earlier turn's failure for its own end, printed no answer and
// exited 1 while its prompt went on to run.
func TestExecResumeSkipsAnEarlierDroppedFailure(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	m := func(n int) string { return fmt.Sprintf("MARK-EDF-%d", n) }
	id := r.create("claude", dmsg(m(1)))
	gate := make(chan struct{})
	r.fake.Enqueue(fakemodel.Reply{Status: 400, Gate: gate})
	n := r.fake.TurnsStarted()
	s2 := r.send(id, dmsg(m(2)))
	testharness.WaitFor(t, 2*time.Minute, "the doomed request reaches the model", func() bool { return r.fake.TurnsStarted() > n })
	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := r.cast("", "exec", "--resume", id, dmsg(m(3)))
		done <- result{out, errOut, code}
	}()
	get := func() *castv1.Session {
		s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
		must(t, err)
		return s
	}
	testharness.WaitFor(t, time.Minute, "exec's prompt stored", func() bool { return get().LastSeq > s2 })
	close(gate)
	res := <-done
	// The earlier turn answered nothing: an answer is the prompt's own.
	if res.code != 0 || !strings.HasPrefix(res.out, "FAKE-ANSWER") || res.errOut != "" {
		t.Fatalf("exec --resume past an earlier turn's dropped failure: exit %d, out %q, err %q; want its own prompt's answer", res.code, res.out, res.errOut)
	}
	if s := get(); s.State != castv1.SessionState_SESSION_STATE_IDLE || s.DeliveredSeq <= s2 {
		t.Fatalf("after exec: %v, delivered seq %d; want idle past seq %d", s.State, s.DeliveredSeq, s2)
	}
	assertDeliveredOnce(t, requestWith(t, r.fake, m(3)), m(1), m(3))
}
