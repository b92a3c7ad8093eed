package claude

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
)

// A file of sidechain records only (Claude Code's subagents/agent-*.jsonl,
// testdata/corpus from daaain/claude-code-log) is told for a subagent's
// run, with its parent session and, from the meta.json beside it, the
// parent's tool call; a session with a sidechain inside it is not.
func TestReadSubagent(t *testing.T) {
	const showcase = "testdata/corpus/minimal_showcase/"
	// A copy without its meta.json: the parent is known, the call is not.
	bare := filepath.Join(t.TempDir(), "agent-bare.jsonl")
	data, err := os.ReadFile(showcase + "55550000-0000-4000-8000-000000000001/subagents/agent-showcol2.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bare, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		ok   bool
		want agents.Subagent
	}{
		{showcase + "55550000-0000-4000-8000-000000000001/subagents/agent-showcol1.jsonl", true,
			agents.Subagent{Kind: "sidechain", ParentNativeID: "55550000-0000-4000-8000-000000000001", CallID: "toolu_sc_showcol1"}},
		{bare, true, agents.Subagent{Kind: "sidechain", ParentNativeID: "55550000-0000-4000-8000-000000000001"}},
		{showcase + "55550000-0000-4000-8000-000000000001.jsonl", false, agents.Subagent{}},
		{"testdata/corpus/sidechain_integrated.jsonl", false, agents.Subagent{}},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			got, ok, err := agents.ReadSubagent(Reader{}, tc.path)
			if err != nil || ok != tc.ok || got != tc.want {
				t.Fatalf("ReadSubagent = %+v, %v, %v; want %+v, %v", got, ok, err, tc.want, tc.ok)
			}
			msgs, skipped, err := Reader{}.ReadReport(tc.path)
			if err != nil || len(msgs) == 0 {
				t.Fatalf("read %d messages, %v", len(msgs), err)
			}
			// A subagent's own file is its conversation, not left out.
			if n := skipped[kindSidechain]; tc.ok && n != 0 {
				t.Errorf("skipped %d sidechain records of the subagent's own file", n)
			}
		})
	}
}
