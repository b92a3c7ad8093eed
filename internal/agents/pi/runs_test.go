package pi

import (
	"os"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// flat is a message's text, call input or result output.
func flat(m transcript.Message) string {
	switch {
	case m.ToolCall != nil:
		return m.ToolCall.Input
	case m.ToolResult != nil:
		return m.ToolResult.Output
	}
	return m.Text
}

// A session whose subagent tool (pi's example extension) kept the run in
// its result's details: the conversation holds the call and the answer and
// nothing of the run, the report counts the run it left out, and ReadRuns
// reads the run whole, naming the session and the spawning call. The
// fixture follows the extension's SubagentDetails in the pinned package
// (examples/extensions/subagent/index.ts).
func TestReadRuns(t *testing.T) {
	const path = "testdata/subagent_run.jsonl"
	msgs, skipped, err := Reader{}.ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	var main []string
	for _, m := range msgs {
		main = append(main, flat(m))
	}
	if all := strings.Join(main, " "); strings.Contains(all, "PISUB-INNER") || !strings.Contains(all, "PISUB-DONE") || !strings.Contains(all, "PISUB-A2") {
		t.Fatalf("the conversation is %q; want the call, its answer and the closing text, nothing of the run", main)
	}
	if skipped[kindRun] != 1 {
		t.Fatalf("skipped %v, want the run counted once", skipped)
	}
	for file, want := range map[string]bool{path: true, "testdata/sample.jsonl": false} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := (Reader{}).MayHoldRuns(data); got != want {
			t.Errorf("MayHoldRuns(%s) = %v, want %v", file, got, want)
		}
	}
	runs, err := agents.ReadRuns(Reader{}, path)
	if err != nil || len(runs) != 1 {
		t.Fatalf("%d runs, %v; want 1", len(runs), err)
	}
	r := runs[0]
	if r.Subagent != (agents.Subagent{Kind: "subagent (worker)", ParentNativeID: "sub-run-uuid", CallID: "call_sub1"}) || r.Kept[kindRun] != 1 || len(r.Skipped) != 0 {
		t.Fatalf("run %+v kept %v skipped %v", r.Subagent, r.Kept, r.Skipped)
	}
	var run []string
	for _, m := range r.Messages {
		run = append(run, m.Kind.String()+":"+flat(m))
	}
	want := []string{"user:Task: PISUB-TASK read the notes", `tool_call:{"command":"cat PISUB-INNER.txt"}`, "tool_result:PISUB-INNER-OUT", "assistant:PISUB-DONE the notes are fine"}
	if strings.Join(run, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the run reads\n%s\nwant\n%s", strings.Join(run, "\n"), strings.Join(want, "\n"))
	}
}
