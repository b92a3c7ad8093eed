package codex

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
)

// A rollout whose session_meta names a subagent source is told for a
// subagent's run, with the thread that spawned it where it says; a thread
// of its own is not.
func TestReadSubagent(t *testing.T) {
	const rest = `
{"timestamp":"2026-11-30T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"SA-U1 look"}]}}
`
	meta := func(source string) string {
		return `{"timestamp":"2026-11-30T10:00:00.000Z","type":"session_meta","payload":{"id":"sa-1","timestamp":"2026-11-30T10:00:00.000Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.171.0","source":` + source + `}}`
	}
	for _, tc := range []struct {
		name, source string
		ok           bool
		want         agents.Subagent
	}{
		{"spawned", `{"subagent":{"thread_spawn":{"parent_thread_id":"019a0000-0000-7000-8000-00000000000p","depth":1}}}`, true,
			agents.Subagent{Kind: "subagent (thread_spawn)", ParentNativeID: "019a0000-0000-7000-8000-00000000000p"}},
		{"a review", `{"subagent":"review"}`, true, agents.Subagent{Kind: "subagent (review)"}},
		{"other", `{"subagent":{"other":"guardian"}}`, true, agents.Subagent{Kind: "subagent (other)"}},
		{"cli", `"cli"`, false, agents.Subagent{}},
		{"exec", `"exec"`, false, agents.Subagent{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rollout.jsonl")
			if err := os.WriteFile(path, []byte(meta(tc.source)+rest), 0o600); err != nil {
				t.Fatal(err)
			}
			got, ok, err := agents.ReadSubagent(Reader{}, path)
			if err != nil || ok != tc.ok || got != tc.want {
				t.Fatalf("ReadSubagent = %+v, %v, %v; want %+v, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}
