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
	fork, req := forkAndAsk(r, sess.Id, 0, "in the fork MARK-F1")
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
	gone, req := forkAndAsk(r, sess.Id, 0, "in the fallback fork MARK-G1")
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
	early, req := forkAndAsk(r, sess.Id, firstEnd, "in the early fork MARK-E1")
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

// forkAndAsk forks a session onto claude at a seq (0: the tip), sends the
// fork a message and returns the fork with the model request its turn made.
func forkAndAsk(r *turnRig, id string, at int64, text string) (*castv1.Session, fakemodel.Request) {
	r.t.Helper()
	fork, err := r.c.Sessions.ForkSession(context.Background(), &castv1.ForkSessionRequest{SessionId: id, AtSeq: at, Agent: "claude"})
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
