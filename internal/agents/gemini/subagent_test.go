package gemini

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
)

// A session whose header kind is "subagent" is told for a subagent's run;
// the CLI keeps it in a folder named after its parent session
// (chats/<parent>/<id>.jsonl), which names the parent. A main session is
// not.
func TestReadSubagent(t *testing.T) {
	header := func(kind string) string {
		return `{"sessionId":"sub-1","projectHash":"h","startTime":"2026-11-30T10:00:00.000Z","lastUpdated":"2026-11-30T10:00:00.000Z","kind":"` + kind + `"}
{"id":"r1","timestamp":"2026-11-30T10:00:01.000Z","type":"user","content":"GSA-U1 look"}
`
	}
	for _, tc := range []struct {
		name, rel, kind string
		ok              bool
		want            agents.Subagent
	}{
		{"in its parent's folder", "chats/parent-7/sub-1.jsonl", "subagent", true, agents.Subagent{Kind: "subagent", ParentNativeID: "parent-7"}},
		{"elsewhere", "copy/sub-1.jsonl", "subagent", true, agents.Subagent{Kind: "subagent"}},
		{"a main session", "chats/session-2026-11-30T10-00-sub1.jsonl", "main", false, agents.Subagent{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.rel)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(header(tc.kind)), 0o600); err != nil {
				t.Fatal(err)
			}
			got, ok, err := agents.ReadSubagent(Reader{}, path)
			if err != nil || ok != tc.ok || got != tc.want {
				t.Fatalf("ReadSubagent = %+v, %v, %v; want %+v, %v", got, ok, err, tc.want, tc.ok)
			}
			// The project folder's marker names the cwd, for a subagent's
			// file one folder further up.
			slug := filepath.Dir(path)
			if filepath.Base(filepath.Dir(slug)) == "chats" {
				slug = filepath.Dir(slug)
			}
			if err := os.WriteFile(filepath.Join(filepath.Dir(slug), projectRootFile), []byte("/w/app\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if cwd, err := (Reader{}).ReadCwd(path); err != nil || cwd != "/w/app" {
				t.Errorf("ReadCwd = %q, %v; want /w/app", cwd, err)
			}
		})
	}
}
