package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

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
