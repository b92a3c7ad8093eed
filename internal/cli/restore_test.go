package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/opencode/opencodetest"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A native file that holds a conversation stops a restore; a header-only
// stray beside it (Gemini's resume in a new minute leaves one under the
// session's short id) does not.
func TestRestoreLooksForAConversation(t *testing.T) {
	full := filepath.Join("..", "agents", "gemini", "testdata", "gemini.jsonl")
	f, err := os.Open(full)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	header, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(t.TempDir(), "session-2026-01-01T00-01-0ab84937.jsonl")
	if err := os.WriteFile(stray, header, 0o600); err != nil {
		t.Fatal(err)
	}
	if !holdsMessages("gemini", full) {
		t.Error("a whole transcript: not there")
	}
	if holdsMessages("gemini", stray) {
		t.Error("a header-only stray: taken for the session")
	}
}

// A session adopted from one agent and switched to another is restored
// as a new session of the agent it runs now: the origin's native id is
// the first agent's (an OpenCode "ses_..." id named a Claude file the
// CLI's resume does not take), and looking for it in the other agent's
// folder never found the original, so nothing said it was still there.
// Restored with its own agent, it gets its native id back.
func TestRestoreSwitchedSessionGetsANewNativeID(t *testing.T) {
	c, addr := diffRig(t)
	ctx := context.Background()
	cwd := t.TempDir()
	const origID = "5b0c6b4e-3f7e-4e34-9a51-0000000000ad"
	adopt := func(text string) string {
		t.Helper()
		resp, err := c.Nodes.AdoptSession(ctx, &castv1.AdoptSessionRequest{Node: "n1", Cwd: cwd, Title: "adopted", HistoryMessages: 1,
			Origin:   &castv1.SessionOrigin{Node: "n1", Agent: "claude", NativeId: origID, Path: filepath.Join(cwd, origID+".jsonl")},
			Messages: []*castv1.Message{{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: text, ClientId: "adopt." + text + ".1"}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.SessionId
	}
	id := adopt("hello")
	if _, err := c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: id, Agent: "pi"}); err != nil {
		t.Fatal(err)
	}
	restore := func(home string) map[string]any {
		t.Helper()
		out, errOut, code := runMain(t, addr, "--json", "restore", id, "--home", home)
		if code != 0 {
			t.Fatalf("cast restore: exit %d\n%s", code, errOut)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return got
	}
	got := restore(t.TempDir())
	if got["agent"] != "pi" || got["native_id"] == origID || got["native_id"] == "" {
		t.Fatalf("a claude session switched to pi restored as %v %v; want a new pi session", got["agent"], got["native_id"])
	}
	if _, err := c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: id, Agent: "claude"}); err != nil {
		t.Fatal(err)
	}
	if got := restore(t.TempDir()); got["native_id"] != origID {
		t.Fatalf("switched back to claude, restored as %v; want its native id %s back", got["native_id"], origID)
	}
}

// An adopted session of an agent whose sessions are rows in its own store
// (OpenCode) is not restored while the store still holds it: there is no
// file to look for, so the check found nothing, and the writer deleted
// the user's session (with whatever it held that cast had not adopted
// yet) to import cast's copy under its id. The store is read directly;
// the writer's CLI is the one found on PATH, here a stand-in that logs
// what it is asked, beside a store holding the session.
func TestRestoreRefusesAStoredSessionStillThere(t *testing.T) {
	c, addr := diffRig(t)
	cwd, home, bin := t.TempDir(), t.TempDir(), t.TempDir()
	const native = "ses_stillthere01"
	calls := filepath.Join(bin, "calls")
	script := "#!/bin/sh\necho \"$@\" >> " + calls + "\n" + `case "$1" in
debug) printf '{"model":"p/m"}' ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "opencode"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	opencodetest.Store(t, home, opencodetest.Session{ID: native, Directory: cwd, Created: 1, Updated: 1})
	db := filepath.Join(home, "opencode", "opencode.db")
	resp, err := c.Nodes.AdoptSession(context.Background(), &castv1.AdoptSessionRequest{Node: "n1", Cwd: cwd, Title: "adopted", HistoryMessages: 1,
		Origin:   &castv1.SessionOrigin{Node: "n1", Agent: "opencode", NativeId: native, Path: db},
		Messages: []*castv1.Message{{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "hello", ClientId: "adopt.hello.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runMain(t, addr, "restore", resp.SessionId, "--home", home)
	asked, _ := os.ReadFile(calls)
	if code == 0 || !strings.Contains(errOut, "still there") {
		t.Errorf("restore of a session its store still holds: exit %d, stderr %q; want it refused as still there", code, errOut)
	}
	if strings.Contains(string(asked), "delete") || strings.Contains(string(asked), "import") {
		t.Errorf("restore changed the store holding the session; the CLI was asked:\n%s", asked)
	}
}

// A restore whose agent's writer trims older messages to fit the context
// window (Claude's) says so, as an export does: it said it restored every
// message, and the user found the start of the conversation missing.
func TestRestoreSaysWhatItTrimmed(t *testing.T) {
	c, addr := diffRig(t)
	cwd := t.TempDir()
	var msgs []*castv1.Message
	for i := range 6 { // ~6 x 200 KB of text: over the writer's window
		kind := castv1.MessageKind_MESSAGE_KIND_USER
		if i%2 == 1 {
			kind = castv1.MessageKind_MESSAGE_KIND_ASSISTANT
		}
		msgs = append(msgs, &castv1.Message{Kind: kind, Agent: "claude", Text: strings.Repeat("long history ", 16_000)})
	}
	id := historySession(t, c, cwd, msgs).Id
	out, errOut, code := runMain(t, addr, "restore", id, "--home", t.TempDir())
	if code != 0 {
		t.Fatalf("cast restore: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, "trimmed") {
		t.Fatalf("a restore that trimmed older messages said only:\n%s", out)
	}
}

// A second restore of a Codex session is refused while the first one's
// rollout still holds the conversation: each Codex restore gets a new id
// (its index would not resume the old), so the check for the origin's id
// never saw an earlier restore, and every restore left another copy, the
// user's turns on one missing from the others. Once that copy is gone, a
// restore writes again.
func TestRestoreRefusesWhileAnEarlierRestoreIsThere(t *testing.T) {
	c, addr := diffRig(t)
	cwd, home := t.TempDir(), t.TempDir()
	const origID = "019a0000-0000-7000-8000-0000000000cd"
	resp, err := c.Nodes.AdoptSession(context.Background(), &castv1.AdoptSessionRequest{Node: "n1", Cwd: cwd, Title: "adopted", HistoryMessages: 1,
		Origin:   &castv1.SessionOrigin{Node: "n1", Agent: "codex", NativeId: origID, Path: filepath.Join(home, "gone.jsonl")},
		Messages: []*castv1.Message{{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "hello", ClientId: "adopt.hello.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	restore := func() (map[string]any, string, int) {
		t.Helper()
		out, errOut, code := runMain(t, addr, "--json", "restore", resp.SessionId, "--home", home)
		var got map[string]any
		if code == 0 {
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
		}
		return got, errOut, code
	}
	first, errOut, code := restore()
	if code != 0 {
		t.Fatalf("first restore: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := restore(); code == 0 || !strings.Contains(errOut, fmt.Sprint(first["native_id"])) {
		t.Fatalf("second restore while the first's rollout is there: exit %d, stderr %q; want it refused naming %v", code, errOut, first["native_id"])
	}
	if err := os.Remove(fmt.Sprint(first["path"])); err != nil {
		t.Fatal(err)
	}
	if again, errOut, code := restore(); code != 0 || again["native_id"] == first["native_id"] {
		t.Fatalf("restore after the first copy was removed: exit %d %v\n%s; want a new copy", code, again["native_id"], errOut)
	}
}
