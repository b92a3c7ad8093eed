package grok

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
)

// A session whose summary.json says session_kind "subagent" (testdata,
// from specstoryai/getspecstory) is told for a subagent's run; others are
// not, and a summary.json that does not decode is counted.
func TestReadSubagent(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		ok   bool
		want agents.Subagent
	}{
		{"session-subagent", true, agents.Subagent{Kind: "subagent (general-purpose)"}},
		{"session-basic", false, agents.Subagent{}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			got, ok, err := agents.ReadSubagent(Reader{}, filepath.Join("testdata", tc.dir))
			if err != nil || ok != tc.ok || got != tc.want {
				t.Fatalf("ReadSubagent = %+v, %v, %v; want %+v, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
	dir := t.TempDir()
	chat := `{"type":"user","content":"<user_query>GSU-U1 go</user_query>","prompt_index":0}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, ChatFile), []byte(chat), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), []byte(`{"info":{"id":7}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	msgs, skipped, err := Reader{}.ReadReport(dir)
	if err != nil || len(msgs) != 1 || skipped["summary.json that did not decode"] != 1 {
		t.Fatalf("read %d messages, skipped %v, %v; want 1, the summary counted", len(msgs), skipped, err)
	}
}
