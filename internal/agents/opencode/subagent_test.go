package opencode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
)

// A session with a parent (one OpenCode's task tool started) is told for
// a subagent's run, in an export and in session rows; others are not.
func TestReadSubagent(t *testing.T) {
	const msg = `{"info":{"id":"msg_01","role":"user","time":{"created":1000}},"parts":[{"id":"prt_01","type":"text","text":"OSA-U1 look"}]}`
	const row = `{"table":"session_message","row":{"id":"m1","seq":1,"type":"user","time_created":1000,"data":{"text":"OSA-U1 look"}}}`
	for _, tc := range []struct {
		name, doc string
		ok        bool
		want      agents.Subagent
	}{
		{"an export with a parent", `{"info":{"id":"ses_child","parentID":"ses_parent","directory":"/w"},"messages":[` + msg + `]}`,
			true, agents.Subagent{Kind: "child session", ParentNativeID: "ses_parent"}},
		{"rows with a parent", `{"table":"session","row":{"id":"ses_child","directory":"/w","parent_id":"ses_parent"}}` + "\n" + row,
			true, agents.Subagent{Kind: "child session", ParentNativeID: "ses_parent"}},
		{"an export of its own", `{"info":{"id":"ses_own","directory":"/w"},"messages":[` + msg + `]}`, false, agents.Subagent{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "session.json")
			if err := os.WriteFile(path, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			got, ok, err := agents.ReadSubagent(Reader{}, path)
			if err != nil || ok != tc.ok || got != tc.want {
				t.Fatalf("ReadSubagent = %+v, %v, %v; want %+v, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}
