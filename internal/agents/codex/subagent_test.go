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

// A spawned thread whose parent's rollout sits in the same sessions tree
// names the parent's spawn_agent call, the one whose output names the
// thread (Codex 0.171's {"agent_id":…}); without the parent's rollout it
// names none.
func TestReadSubagentFindsTheSpawningCall(t *testing.T) {
	const parent, run = "019a0000-0000-7000-8000-0000000000aa", "019a0000-0000-7000-8000-0000000000bb"
	line := func(typ, payload string) string {
		return `{"timestamp":"2026-11-30T10:00:00.000Z","type":"` + typ + `","payload":` + payload + "}\n"
	}
	meta := func(id, source string) string {
		return line("session_meta", `{"id":"`+id+`","timestamp":"2026-11-30T10:00:00.000Z","cwd":"/w","originator":"codex_exec","cli_version":"0.171.0","source":`+source+`}`)
	}
	parentRollout := meta(parent, `"exec"`) +
		line("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"ask a helper"}]}`) +
		line("response_item", `{"type":"function_call","name":"spawn_agent","namespace":"multi_agent_v1","arguments":"{\"message\":\"read\"}","call_id":"call_spawn"}`) +
		line("response_item", `{"type":"function_call_output","call_id":"call_spawn","output":"{\"agent_id\":\"`+run+`\",\"nickname\":\"Ptolemy\"}"}`) +
		line("response_item", `{"type":"function_call","name":"wait_agent","namespace":"multi_agent_v1","arguments":"{\"targets\":[\"`+run+`\"]}","call_id":"call_wait"}`) +
		line("response_item", `{"type":"function_call_output","call_id":"call_wait","output":"{\"status\":{\"`+run+`\":{\"completed\":\"done\"}}}"}`)
	runRollout := meta(run, `{"subagent":{"thread_spawn":{"parent_thread_id":"`+parent+`","depth":1}}}`) +
		line("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"read"}]}`)
	home := t.TempDir()
	day := filepath.Join(home, "sessions", "2026", "11", "30")
	if err := os.MkdirAll(day, 0o700); err != nil {
		t.Fatal(err)
	}
	runPath := filepath.Join(day, "rollout-2026-11-30T10-00-05-"+run+".jsonl")
	if err := os.WriteFile(runPath, []byte(runRollout), 0o600); err != nil {
		t.Fatal(err)
	}
	want := agents.Subagent{Kind: "subagent (thread_spawn)", ParentNativeID: parent}
	if got, ok, err := agents.ReadSubagent(Reader{}, runPath); err != nil || !ok || got != want {
		t.Fatalf("without the parent's rollout: %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if err := os.WriteFile(filepath.Join(day, "rollout-2026-11-30T10-00-00-"+parent+".jsonl"), []byte(parentRollout), 0o600); err != nil {
		t.Fatal(err)
	}
	want.CallID = "call_spawn"
	if got, ok, err := agents.ReadSubagent(Reader{}, runPath); err != nil || !ok || got != want {
		t.Fatalf("beside the parent's rollout: %+v, %v, %v; want %+v", got, ok, err, want)
	}
}
