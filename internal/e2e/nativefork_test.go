package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A Claude fork at the tip the parent's native session has seen runs as a
// native fork (claude --fork-session): its request carries the parent's
// history once, in order, and the parent's native file stays as it was. A
// native fork that cannot run (the parent's file is gone) falls back to a
// rebuild. A fork at an earlier seq is rebuilt from the neutral copy and
// carries only the history up to its cut.
func TestNativeForkClaude(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "first question MARK-N1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	seq := r.send(sess.Id, "second question MARK-N2")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)

	files := claudeFiles(t, r.homes["claude"])
	if len(files) != 1 {
		t.Fatalf("want the parent's one native file, found %v", files)
	}
	parentFile := files[0]
	parentBytes, err := os.ReadFile(parentFile)
	if err != nil {
		t.Fatal(err)
	}

	// At the tip, onto the same agent: a native fork.
	fork, req := forkAndAsk(r, sess.Id, 0, "claude", "in the fork MARK-F1")
	assertItems(t, req.Items, "MARK-N1", "MARK-N2", "MARK-F1")
	for _, mark := range []string{"MARK-N1", "MARK-N2", "MARK-F1"} {
		if n := countItems(req.Items, mark); n != 1 {
			t.Fatalf("the fork's request holds %q %d times", mark, n)
		}
	}
	if path := forkPath(t, r.node.Output(), fork.Id); path != "native" {
		t.Fatalf("fork at the tip took the %q path", path)
	}
	if after, _ := os.ReadFile(parentFile); !bytes.Equal(after, parentBytes) {
		t.Fatal("the native fork changed the parent's native file")
	}
	if files := claudeFiles(t, r.homes["claude"]); len(files) != 2 {
		t.Fatalf("want the parent's file and the fork's, found %v", files)
	}
	// The fork's neutral copy: the copied history, its prompt and one
	// answer; nothing of the parent's turns stored twice.
	if got := kinds(r.messages(fork.Id)); got != "user,assistant,user,assistant,notice,user,assistant" {
		t.Fatalf("the fork's messages: %s", got)
	}

	// At the tip again, but the parent's native file is gone: the native
	// fork does not run, the turn is rebuilt instead and still answered.
	hidden := parentFile + ".away"
	if err := os.Rename(parentFile, hidden); err != nil {
		t.Fatal(err)
	}
	gone, req := forkAndAsk(r, sess.Id, 0, "claude", "in the fallback fork MARK-G1")
	if err := os.Rename(hidden, parentFile); err != nil {
		t.Fatal(err)
	}
	assertItems(t, req.Items, "MARK-N1", "MARK-N2", "MARK-G1")
	if n := countItems(req.Items, "MARK-N2"); n != 1 {
		t.Fatalf("the fallback fork's request holds MARK-N2 %d times", n)
	}
	if path := forkPath(t, r.node.Output(), gone.Id); path != "rebuild" {
		t.Fatalf("a native fork that did not run ended on the %q path", path)
	}
	tried := false
	for _, line := range strings.Split(r.node.Output(), "\n") {
		tried = tried || strings.Contains(line, "native fork did not run") && strings.Contains(line, gone.Id)
	}
	if !tried {
		t.Fatal("the fallback fork never tried the native fork")
	}

	// At an earlier seq (the end of the first turn): a rebuild.
	var firstEnd int64
	for _, m := range r.messages(sess.Id) {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT {
			firstEnd = m.Seq
			break
		}
	}
	early, req := forkAndAsk(r, sess.Id, firstEnd, "claude", "in the early fork MARK-E1")
	assertItems(t, req.Items, "MARK-N1", "MARK-E1")
	if n := countItems(req.Items, "MARK-N2") + countItems(req.Items, "MARK-F1"); n != 0 {
		t.Fatal("the early fork's request carries messages after its cut")
	}
	if path := forkPath(t, r.node.Output(), early.Id); path != "rebuild" {
		t.Fatalf("fork at an earlier seq took the %q path", path)
	}
	if after, _ := os.ReadFile(parentFile); !bytes.Equal(after, parentBytes) {
		t.Fatal("the rebuilt fork changed the parent's native file")
	}
}

// A Codex fork at the tip runs as a native fork (codex exec fork): its
// rollout reads the history from the parent's, so the request carries the
// parent's history once, in order, and the parent's rollout stays as it
// was; the fork's neutral copy stores none of the parent's turns twice.
func TestNativeForkCodex(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "codex")
	sess := twoTurns(r, "codex", "first question MARK-C1", "second question MARK-C2")

	files := codexFiles(t, r.homes["codex"])
	if len(files) != 1 {
		t.Fatalf("want the parent's one rollout, found %v", files)
	}
	parentFile := files[0]
	parentBytes, err := os.ReadFile(parentFile)
	if err != nil {
		t.Fatal(err)
	}

	fork, req := forkAndAsk(r, sess.Id, 0, "codex", "in the fork MARK-CF1")
	assertOnce(t, req.Items, "MARK-C1", "MARK-C2", "MARK-CF1")
	if path := forkPath(t, r.node.Output(), fork.Id); path != "native" {
		t.Fatalf("codex fork at the tip took the %q path", path)
	}
	if after, _ := os.ReadFile(parentFile); !bytes.Equal(after, parentBytes) {
		t.Fatal("the native fork changed the parent's rollout")
	}
	if files := codexFiles(t, r.homes["codex"]); len(files) != 2 {
		t.Fatalf("want the parent's rollout and the fork's, found %v", files)
	}
	if got := kinds(r.messages(fork.Id)); got != "user,assistant,user,assistant,notice,user,assistant" {
		t.Fatalf("the fork's messages: %s", got)
	}

	// A second turn in the fork resumes its own rollout, which still reads
	// the parent's history.
	req = askLast(r, fork.Id, "again in the fork MARK-CF2")
	assertItems(t, req.Items, "MARK-C1", "MARK-C2", "MARK-CF1", "MARK-CF2")
	if n := countItems(req.Items, "MARK-C2"); n != 1 {
		t.Fatalf("the fork's second request holds MARK-C2 %d times", n)
	}
	if after, _ := os.ReadFile(parentFile); !bytes.Equal(after, parentBytes) {
		t.Fatal("the fork's second turn changed the parent's rollout")
	}

	// The parent's native session goes stale (a refused prompt) and is
	// rebuilt: under a new native id, so the rollout the fork reads is not
	// rewritten (the refused turn may only have appended to it), and the
	// fork's history stays its own.
	r.fake.FailNext(1, 400)
	seq := r.send(sess.Id, "refused MARK-C3")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_FAILED, seq-1)
	var failedBytes []byte
	failedBytes, err = os.ReadFile(parentFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(failedBytes, parentBytes) {
		t.Fatal("the refused turn rewrote the parent's rollout")
	}
	seq = r.send(sess.Id, "retry MARK-C4")
	// IDLE after FAILED is the retry's end. Not seq: the rebuilt rollout's
	// answer has a line id ("line:N") an older entry of the old rollout
	// may already hold, and the neutral copy dedups it by that id.
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq-1)
	turns := r.fake.Turns()
	req = turns[len(turns)-1]
	assertItems(t, req.Items, "MARK-C1", "MARK-C2", "retry MARK-C4")
	if n := countItems(req.Items, "MARK-C3"); n != 0 {
		t.Fatalf("the refused prompt reached the model %d times after it failed", n)
	}
	if n := countItems(req.Items, "MARK-C2") + countItems(req.Items, "MARK-CF1"); n != 1 {
		t.Fatalf("the rebuilt parent's request holds MARK-C2 or the fork's MARK-CF1 %d times in all", n)
	}
	if after, _ := os.ReadFile(parentFile); !bytes.Equal(after, failedBytes) {
		t.Fatal("the parent's rebuild rewrote the rollout its fork reads")
	}
	if files := codexFiles(t, r.homes["codex"]); len(files) != 3 {
		t.Fatalf("want the parent's old rollout, its rebuild and the fork's, found %v", files)
	}
	req = askLast(r, fork.Id, "third in the fork MARK-CF3")
	assertItems(t, req.Items, "MARK-C1", "MARK-C2", "MARK-CF1", "MARK-CF2", "MARK-CF3")
	if n := countItems(req.Items, "MARK-C2"); n != 1 {
		t.Fatalf("the fork's request after the parent's rebuild holds MARK-C2 %d times", n)
	}
	if n := countItems(req.Items, "MARK-C3") + countItems(req.Items, "MARK-C4"); n != 0 {
		t.Fatal("the fork's request carries the parent's turns after the cut")
	}
}

// An OpenCode fork at the tip runs as a native fork (opencode run
// --session ID --fork, which copies the session's rows into a new
// session): the request carries the parent's history once, in order, the
// fork's neutral copy stores none of it twice, and the parent's native
// session does not get the fork's turn.
func TestNativeForkOpenCode(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "opencode")
	sess := twoTurns(r, "opencode", "first question MARK-O1", "second question MARK-O2")

	fork, req := forkAndAsk(r, sess.Id, 0, "opencode", "in the fork MARK-OF1")
	assertOnce(t, req.Items, "MARK-O1", "MARK-O2", "MARK-OF1")
	if path := forkPath(t, r.node.Output(), fork.Id); path != "native" {
		t.Fatalf("opencode fork at the tip took the %q path", path)
	}
	if got := kinds(r.messages(fork.Id)); got != "user,assistant,user,assistant,notice,user,assistant" {
		t.Fatalf("the fork's messages: %s", got)
	}

	req = askLast(r, fork.Id, "again in the fork MARK-OF2")
	assertOnce(t, req.Items, "MARK-O1", "MARK-O2", "MARK-OF1", "MARK-OF2")

	req = askLast(r, sess.Id, "third question MARK-O3")
	assertOnce(t, req.Items, "MARK-O1", "MARK-O2", "MARK-O3")
	if n := countItems(req.Items, "MARK-OF1") + countItems(req.Items, "MARK-OF2"); n != 0 {
		t.Fatal("the parent's native session got the fork's turns")
	}
}

// twoTurns creates a session of agent and runs two turns in it.
func twoTurns(r *turnRig, agent, first, second string) *castv1.Session {
	r.t.Helper()
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: agent, Cwd: r.t.TempDir(), Text: first})
	if err != nil {
		r.t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	seq := r.send(sess.Id, second)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	return sess
}

// askLast sends a session a message and returns the model request of the
// turn it ran.
func askLast(r *turnRig, id, text string) fakemodel.Request {
	r.t.Helper()
	seq := r.send(id, text)
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns := r.fake.Turns()
	return turns[len(turns)-1]
}

// assertOnce: the marks reached the model in order, each in one user item.
func assertOnce(t *testing.T, items []fakemodel.Item, marks ...string) {
	t.Helper()
	assertItems(t, items, marks...)
	for _, mark := range marks {
		if n := countItems(items, mark); n != 1 {
			t.Fatalf("the request holds %q %d times", mark, n)
		}
	}
}

// codexFiles lists Codex's rollouts under an agent HOME.
func codexFiles(t *testing.T, home string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(home, ".codex", "sessions", "*", "*", "*", "rollout-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// forkAndAsk forks a session onto agent at a seq (0: the tip), sends the
// fork a message and returns the fork with the model request its turn made.
func forkAndAsk(r *turnRig, id string, at int64, agent, text string) (*castv1.Session, fakemodel.Request) {
	r.t.Helper()
	fork, err := r.c.Sessions.ForkSession(context.Background(), &castv1.ForkSessionRequest{SessionId: id, AtSeq: at, Agent: agent})
	if err != nil {
		r.t.Fatal(err)
	}
	seq := r.send(fork.Id, text)
	r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns := r.fake.Turns()
	return fork, turns[len(turns)-1]
}

// claudeFiles lists Claude's native transcripts under an agent HOME.
func claudeFiles(t *testing.T, home string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// countItems counts the user items holding mark (the fake model's
// answers quote the last user text).
func countItems(items []fakemodel.Item, mark string) int {
	n := 0
	for _, it := range items {
		if it.Role == "user" && strings.Contains(it.Text+" "+it.ToolInput, mark) {
			n++
		}
	}
	return n
}

// forkPath is the last fork_path the node logged for a fork (a native
// fork that fell back logs "native", then "rebuild").
func forkPath(t *testing.T, out, sessionID string) string {
	t.Helper()
	path := ""
	for _, line := range strings.Split(out, "\n") {
		var ev struct {
			Msg      string `json:"msg"`
			Session  string `json:"session"`
			ForkPath string `json:"fork_path"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Session == sessionID && ev.ForkPath != "" {
			path = ev.ForkPath
		}
	}
	if path != "" {
		t.Logf("fork %s: fork_path %s", sessionID, path)
		return path
	}
	t.Fatalf("no fork_path logged for %s in the node's output:\n%s", sessionID, out)
	return ""
}
