package codex

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Rollouts from the test suites of two peers (testdata/peers, NOTICE.md
// there) hold what other writers and older Codex versions put in a
// rollout: a function_call whose arguments is a JSON object (agentsview),
// and Codex 0.66's apply_patch output in its {"output","metadata"}
// wrapper (agtrace). The call is kept with its arguments as JSON text, the
// output is unwrapped into its text and exit code, and nothing is reported
// left out.
func TestPeerRollouts(t *testing.T) {
	for _, tc := range []struct {
		file, call string
		want       []string // what was read of the prompt and of the call
		skipped    map[string]int
	}{
		{"agentsview/fc_args_2.jsonl", "call_test", []string{
			"user apply patch",
			`tool_call call_test apply_patch {"patch":"*** Begin Patch\n*** Update File: internal/parser/codex.go\n*** Update File: internal/parser/parser_test.go\n*** End Patch"}`,
		}, nil},
		{"agentsview/fc_stdin.jsonl", "call_test", []string{
			"user send input",
			`tool_call call_test write_stdin {"chars":"yes\n","session_id":"sess-42"}`,
		}, nil},
		// Its git snapshots are not conversation and are reported.
		{"agtrace/codex_session.jsonl", "call_pBXH93fl6ZXH2svDOFIlr8GA", []string{
			"user add myapp directory and create myapp/hoge.py which shows result of print(1+1).",
			"tool_call call_pBXH93fl6ZXH2svDOFIlr8GA apply_patch \"*** Begin Patch\\n*** Add File: myapp/hoge.py\\n+print(1 + 1)\\n*** End Patch\"",
			"tool_result call_pBXH93fl6ZXH2svDOFIlr8GA exit=0 err=false Success. Updated the following files:\nA myapp/hoge.py\n",
			"user cd to myapp and run python hoge.py",
		}, map[string]int{"ghost_snapshot item": 2}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "peers", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			p, err := Parse(f)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, line := range brief(p.Messages) {
				if strings.HasPrefix(line, "user ") || strings.Contains(line, " "+tc.call+" ") {
					got = append(got, line)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("\n got: %q\nwant: %q", got, tc.want)
			}
			if len(p.Kinds) > 0 || len(tc.skipped) > 0 {
				if !reflect.DeepEqual(map[string]int(p.Kinds), tc.skipped) {
					t.Errorf("skipped %v, want %v", p.Kinds, tc.skipped)
				}
			}
		})
	}
}
