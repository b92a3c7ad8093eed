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

// A subagent's run beside its parent's file names the parent's
// invoke_agent call whose prompt it ran (as Gemini CLI 0.61 writes them:
// the call's id prefixed with the tool's name); with two calls, the one
// with its prompt; without the parent's file, none.
func TestReadSubagentFindsTheInvokeCall(t *testing.T) {
	const parent = "8e7d6c5b-4a39-4281-b7c6-d5e4f3a2b1c0"
	header := func(id, kind string) string {
		return `{"sessionId":"` + id + `","projectHash":"h","startTime":"2026-11-30T10:00:00.000Z","lastUpdated":"2026-11-30T10:00:00.000Z","kind":"` + kind + `"}` + "\n"
	}
	call := func(n, prompt string) string {
		return `{"id":"g` + n + `","timestamp":"2026-11-30T10:00:0` + n + `.000Z","type":"gemini","content":"","toolCalls":[{"id":"invoke_agent__call_` + n +
			`","name":"invoke_agent","args":{"agent_name":"generalist","prompt":"` + prompt + `"},"result":[{"functionResponse":{"id":"invoke_agent__call_` + n +
			`","name":"invoke_agent","response":{"output":"done ` + n + `"}}}],"status":"success"}]}` + "\n"
	}
	chats := filepath.Join(t.TempDir(), "tmp", "w", "chats")
	runPath := filepath.Join(chats, parent, "a40fe8f2-8f98-411b-9b09-2412a101bb9a.jsonl")
	if err := os.MkdirAll(filepath.Dir(runPath), 0o700); err != nil {
		t.Fatal(err)
	}
	run := header("a40fe8f2-8f98-411b-9b09-2412a101bb9a", "subagent") +
		`{"id":"r1","timestamp":"2026-11-30T10:00:03.000Z","type":"user","content":[{"text":"GSA-TASK-2 read the notes"}]}` + "\n"
	if err := os.WriteFile(runPath, []byte(run), 0o600); err != nil {
		t.Fatal(err)
	}
	want := agents.Subagent{Kind: "subagent", ParentNativeID: parent}
	if got, ok, err := agents.ReadSubagent(Reader{}, runPath); err != nil || !ok || got != want {
		t.Fatalf("without the parent's file: %+v, %v, %v; want %+v", got, ok, err, want)
	}
	main := header(parent, "main") + `{"id":"u1","timestamp":"2026-11-30T10:00:01.000Z","type":"user","content":[{"text":"GSA-U1 ask two helpers"}]}` + "\n" +
		call("1", "GSA-TASK-1 list the files") + call("2", "GSA-TASK-2 read the notes")
	for name, body := range map[string]string{
		"session-2026-11-30T10-00-" + parent[:8] + ".jsonl": main,
		"session-2026-11-30T10-05-" + parent[:8] + ".jsonl": header(parent, "main"), // a resume's stray header
	} {
		if err := os.WriteFile(filepath.Join(chats, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want.CallID = "invoke_agent__call_2"
	if got, ok, err := agents.ReadSubagent(Reader{}, runPath); err != nil || !ok || got != want {
		t.Fatalf("beside the parent's file: %+v, %v, %v; want %+v", got, ok, err, want)
	}
}
