package cli

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"
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
