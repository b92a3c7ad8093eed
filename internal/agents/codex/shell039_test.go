package codex

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// A rollout as Codex 0.39 wrote it: its shell tool answered with a JSON
// wrapper, {"output": ..., "metadata": {"exit_code": ...}}. The reader keeps
// the output text and the exit code, not the wrapper, so other agents get
// the text and a round trip to Codex does not wrap it twice. A JSON answer
// of the same shape from another tool is that tool's data and stays as is.
func TestReadCodex039ShellOutputUnwrapped(t *testing.T) {
	const rollout = `{"timestamp":"2025-09-20T08:00:00.000Z","type":"session_meta","payload":{"id":"0199a1b2-0000-7000-8000-000000000039","timestamp":"2025-09-20T08:00:00.000Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.39.0","instructions":null}}
{"timestamp":"2025-09-20T08:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"S39-U1 what is here?"}]}}
{"timestamp":"2025-09-20T08:00:02.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"ls\"],\"workdir\":\"/w\"}","call_id":"call_S39a"}}
{"timestamp":"2025-09-20T08:00:03.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_S39a","output":"{\"output\":\"S39-OUT a.txt\\n\\\"quoted\\\" b.txt\\n\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.01}}"}}
{"timestamp":"2025-09-20T08:00:04.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"cat nope\"]}","call_id":"call_S39b"}}
{"timestamp":"2025-09-20T08:00:05.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_S39b","output":"{\"output\":\"S39-ERR cat: nope: No such file or directory\\n\",\"metadata\":{\"exit_code\":1,\"duration_seconds\":0.0}}"}}
{"timestamp":"2025-09-20T08:00:06.000Z","type":"response_item","payload":{"type":"function_call","name":"mcp__store__get","arguments":"{}","call_id":"call_S39c"}}
{"timestamp":"2025-09-20T08:00:07.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_S39c","output":"{\"output\":\"S39-DATA\",\"metadata\":{\"exit_code\":7}}"}}
{"timestamp":"2025-09-20T08:00:08.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"S39-A1 two files"}]}}
{"timestamp":"2025-09-20T08:00:09.000Z","type":"response_item","payload":{"type":"ghost_snapshot","ghost_commit":{"id":"abc"}}}
{"timestamp":"2025-09-20T08:00:09.000Z","type":"token_usage_record","payload":{}}
{"timestamp":"2025-09-20T08:00:09.000Z","type":"future_line","payload":{}}
`
	p, err := Parse(strings.NewReader(rollout))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"user S39-U1 what is here?",
		`tool_call call_S39a shell {"command":["bash","-lc","ls"],"workdir":"/w"}`,
		"tool_result call_S39a exit=0 err=false S39-OUT a.txt\n\"quoted\" b.txt\n",
		`tool_call call_S39b shell {"command":["bash","-lc","cat nope"]}`,
		"tool_result call_S39b exit=1 err=false S39-ERR cat: nope: No such file or directory\n",
		"tool_call call_S39c mcp__store__get {}",
		`tool_result call_S39c exit=- err=false {"output":"S39-DATA","metadata":{"exit_code":7}}`,
		"assistant S39-A1 two files",
	}
	if got := brief(p.Messages); !reflect.DeepEqual(got, want) {
		t.Fatalf("\n got: %q\nwant: %q", got, want)
	}
	if want := map[string]int{"ghost_snapshot item": 1, "future_line record": 1}; !reflect.DeepEqual(map[string]int(p.Kinds), want) {
		t.Errorf("skipped %v, want %v", p.Kinds, want)
	}

	// Written for today's Codex and read back: the text once, no wrapper.
	w, err := Writer{Now: fixedNow}.Write(target(t), p.Messages)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(data), `metadata`) != 1 { // the mcp tool's own data only
		t.Errorf("the rewritten rollout still holds shell wrappers:\n%s", data)
	}
	back, err := Reader{}.Read(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range back {
		if r := m.ToolResult; r != nil && r.CallID == "call_S39a" && r.Output != "Process exited with code 0\nOutput:\nS39-OUT a.txt\n\"quoted\" b.txt\n" {
			t.Errorf("round trip output %q", r.Output)
		}
	}
}
