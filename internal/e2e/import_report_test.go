package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// `cast import` says what it kept and what it left out of the file, by kind
// and count: `kept` and `skipped` in --json, a line each in the human output.
func TestCLIImportReportsKeptAndSkipped(t *testing.T) {
	r := newCLIRig(t, "n1")
	cwd := t.TempDir()
	asst := `"type":"assistant","cwd":"` + cwd + `","timestamp":"2026-11-30T10:00:01.000Z","message":{"id":"msg_IR1","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"IR-A1 done"}]}`
	file := filepath.Join(t.TempDir(), "session.jsonl")
	lines := []string{
		`{"type":"user","uuid":"u1","parentUuid":null,"cwd":"` + cwd + `","timestamp":"2026-11-30T10:00:00.000Z","message":{"role":"user","content":"IR-U1 do it"}}`,
		`{"uuid":"a1","parentUuid":"u1",` + asst + `}`,
		`{"uuid":"a2","parentUuid":"a1",` + asst + `}`, // the same API message twice
		`{"type":"attachment","uuid":"x1","parentUuid":"a2","attachment":{"type":"file","filename":"/w/notes.txt"}}`,
		`{"type":"brand-new-record","note":"a later Claude Code"}`,
		`{"broken`,
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Messages int            `json:"messages"`
		Kept     map[string]int `json:"kept"`
		Skipped  map[string]int `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(r.cli.must("import", "--agent", "claude", "--node", "n1", "--json", file)), &rep); err != nil {
		t.Fatal(err)
	}
	wantSkipped := map[string]int{"repeated assistant record": 1, "attachment (file)": 1, "brand-new-record": 1, "malformed line": 1}
	if rep.Messages != 2 || !reflect.DeepEqual(rep.Kept, map[string]int{"user": 1, "assistant": 1}) || !reflect.DeepEqual(rep.Skipped, wantSkipped) {
		t.Fatalf("import reported %d messages, kept %v, skipped %v; want 2, 1 user + 1 assistant, %v", rep.Messages, rep.Kept, rep.Skipped, wantSkipped)
	}
	_, errOut, code := r.cli.run("import", "--agent", "claude", "--node", "n1", file)
	want := "skipped from session.jsonl: 1 attachment (file), 1 brand-new-record, 1 malformed line, 1 repeated assistant record"
	if code != 0 || !strings.Contains(errOut, "imported 2 messages (1 assistant, 1 user)") || !strings.Contains(errOut, want) {
		t.Fatalf("exit %d; human report lacks %q:\n%s", code, want, errOut)
	}
}
