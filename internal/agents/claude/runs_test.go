package claude

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
)

// An older session file keeps its subagents' runs as sidechain records
// beside the main chain: Read leaves them out (counted), ReadRuns reads
// each run on its own with the parent session and the spawning call, and
// the runs account for every sidechain record the report counted.
func TestReadRuns(t *testing.T) {
	const parent = "11110000-0000-4000-8000-000000000001"
	rec := func(uuid, parentUUID, agentID string, side bool, typ, content string) string {
		p := `null`
		if parentUUID != "" {
			p = `"` + parentUUID + `"`
		}
		a := ""
		if agentID != "" {
			a = `"agentId":"` + agentID + `",`
		}
		msg := `{"role":"user","content":` + content + `}`
		if typ == "assistant" {
			msg = `{"id":"m-` + uuid + `","role":"assistant","model":"claude-sonnet-4-5","content":` + content + `}`
		}
		return `{"parentUuid":` + p + `,"isSidechain":` + map[bool]string{true: "true", false: "false"}[side] + `,` + a +
			`"type":"` + typ + `","message":` + msg + `,"uuid":"` + uuid + `","timestamp":"2025-11-19T22:53:34.000Z","sessionId":"` + parent + `"}`
	}
	two := strings.Join([]string{
		rec("u1", "", "", false, "user", `"RUNS-U1 ask two helpers"`),
		rec("a1", "u1", "", false, "assistant", `[{"type":"tool_use","id":"toolu_A","name":"Task","input":{"prompt":"RUNS-TA"}},{"type":"tool_use","id":"toolu_B","name":"Task","input":{"prompt":"RUNS-TB"}}]`),
		rec("sa1", "", "aaa1", true, "user", `"RUNS-TA"`),
		rec("sb1", "", "bbb2", true, "user", `"RUNS-TB"`),
		rec("sa2", "sa1", "aaa1", true, "assistant", `[{"type":"text","text":"RUNS-DA done A"}]`),
		rec("sb2", "sb1", "bbb2", true, "assistant", `[{"type":"text","text":"RUNS-DB done B"}]`),
		rec("r1", "a1", "aaa1", false, "user", `[{"type":"tool_result","tool_use_id":"toolu_A","content":"RUNS-DA done A"}]`),
		rec("r2", "r1", "bbb2", false, "user", `[{"type":"tool_result","tool_use_id":"toolu_B","content":"RUNS-DB done B"}]`),
		rec("a2", "r2", "", false, "assistant", `[{"type":"text","text":"RUNS-A2 both done"}]`),
	}, "\n") + "\n"
	twoPath := filepath.Join(t.TempDir(), parent+".jsonl")
	if err := os.WriteFile(twoPath, []byte(two), 0o600); err != nil {
		t.Fatal(err)
	}
	type want struct {
		call, texts string
		records     int
	}
	for _, tc := range []struct {
		name, path string
		want       []want
	}{
		// daaain/claude-code-log's fixture (2.0.46): agentId on some
		// records only, a dangling parent inside the run.
		{"one run of an older CLI", "testdata/corpus/sidechain_integrated.jsonl", []want{{"toolu_01JA2mLseQCAW3MdwPE4qWEk", "I'll research", 3}}},
		{"two interleaved runs", twoPath, []want{{"toolu_A", "RUNS-TA RUNS-DA", 2}, {"toolu_B", "RUNS-TB RUNS-DB", 2}}},
		{"no runs inside", "testdata/corpus/minimal_showcase/55550000-0000-4000-8000-000000000001.jsonl", nil},
		{"a file that is itself a run", "testdata/corpus/minimal_showcase/55550000-0000-4000-8000-000000000001/subagents/agent-showcol1.jsonl", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs, err := agents.ReadRuns(Reader{}, tc.path)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			// A follower reads runs only where the bytes may hold one.
			if may := (Reader{}).MayHoldRuns(data); len(tc.want) > 0 && !may {
				t.Fatalf("MayHoldRuns is false for a file with %d runs", len(tc.want))
			}
			if len(runs) != len(tc.want) {
				t.Fatalf("%d runs, want %d: %+v", len(runs), len(tc.want), runs)
			}
			_, skipped, err := Reader{}.ReadReport(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			kept := 0
			for i, w := range tc.want {
				r := runs[i]
				if r.CallID != w.call || r.Kind != "sidechain" || r.ParentNativeID == "" {
					t.Errorf("run %d is %+v, want call %s and a parent", i, r.Subagent, w.call)
				}
				var texts []string
				for _, m := range r.Messages {
					texts = append(texts, m.Text)
				}
				for _, s := range strings.Fields(w.texts) {
					if !strings.Contains(strings.Join(texts, " "), s) {
						t.Errorf("run %d lacks %q: %q", i, s, texts)
					}
				}
				if r.Kept[kindSidechain] != w.records {
					t.Errorf("run %d keeps %v, want %d sidechain records", i, r.Kept, w.records)
				}
				kept += r.Kept[kindSidechain]
			}
			if kept != skipped[kindSidechain] {
				t.Errorf("the runs keep %d sidechain records, the report left out %d", kept, skipped[kindSidechain])
			}
		})
	}
}
