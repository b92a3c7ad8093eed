package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// `cast import` says what it kept and what it left out of the file, by kind
// and count: `kept` and `skipped` in --json, a line each in the human output.
func TestCLIImportReportsKeptAndSkipped(t *testing.T) {
	t.Parallel()
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

// A file holding only a subagent's run (Claude Code's subagents/agent-*.jsonl,
// from daaain/claude-code-log: internal/agents/claude/testdata/corpus) says
// so in the import report, with its parent session and tool call; with
// --parent it becomes that cast session's worker (hidden, linked), its
// records its conversation.
func TestCLIImportSubagentFile(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t, "n1")
	cwd := t.TempDir()
	const showcase = "../agents/claude/testdata/corpus/minimal_showcase/"
	const sub = showcase + "55550000-0000-4000-8000-000000000001/subagents/agent-showcol1"
	dir := filepath.Join(t.TempDir(), "subagents")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".jsonl", ".meta.json"} {
		data, err := os.ReadFile(sub + ext)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "agent-showcol1"+ext), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "agent-showcol1.jsonl")
	parent := strings.TrimSpace(r.cli.must("import", "--agent", "claude", "--node", "n1", "--cwd", cwd, showcase+"55550000-0000-4000-8000-000000000001.jsonl"))

	var rep struct {
		ID       string            `json:"id"`
		Kept     map[string]int    `json:"kept"`
		Skipped  map[string]int    `json:"skipped"`
		Subagent map[string]string `json:"subagent"`
		ParentID string            `json:"parent_id"`
	}
	if err := json.Unmarshal([]byte(r.cli.must("import", "--agent", "claude", "--cwd", cwd, "--parent", parent, "--json", file)), &rep); err != nil {
		t.Fatal(err)
	}
	wantSub := map[string]string{"kind": "sidechain", "parent_native_id": "55550000-0000-4000-8000-000000000001", "call_id": "toolu_sc_showcol1"}
	if !reflect.DeepEqual(rep.Subagent, wantSub) || rep.ParentID != parent || rep.Kept["user"] != 1 || rep.Kept["assistant"] != 1 || len(rep.Skipped) != 0 {
		t.Fatalf("report %+v; want subagent %v, parent %s, the run's own user and assistant messages kept, nothing skipped", rep, wantSub, parent)
	}
	worker, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: rep.ID})
	if err != nil {
		t.Fatal(err)
	}
	if worker.ParentId != parent || !worker.Subagent || worker.ParentCallId != "toolu_sc_showcol1" {
		t.Fatalf("imported session: parent %q, subagent %v, call %q; want a worker of %s started by toolu_sc_showcol1", worker.ParentId, worker.Subagent, worker.ParentCallId, parent)
	}

	_, errOut, code := r.cli.run("import", "--agent", "claude", "--node", "n1", "--cwd", cwd, file)
	want := "agent-showcol1.jsonl holds only a subagent's run (sidechain of claude session 55550000-0000-4000-8000-000000000001, " +
		"started by its tool call toolu_sc_showcol1); imported as a session of its own"
	if code != 0 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "--parent SESSION") {
		t.Fatalf("exit %d; human report lacks %q:\n%s", code, want, errOut)
	}
}

// An older Claude Code session file keeps its subagent's run as sidechain
// records beside the main chain (daaain/claude-code-log's fixture, 2.0.46):
// the import keeps the run as a worker of the imported session, linked to
// the spawning call, instead of leaving it out, and says so.
func TestCLIImportSplitsSidechainRuns(t *testing.T) {
	r := newCLIRig(t, "n1")
	const file = "../agents/claude/testdata/corpus/sidechain_integrated.jsonl"
	var rep struct {
		ID      string         `json:"id"`
		Skipped map[string]int `json:"skipped"`
		Workers []struct {
			ID       string            `json:"id"`
			Subagent map[string]string `json:"subagent"`
			Messages int               `json:"messages"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(r.cli.must("import", "--agent", "claude", "--node", "n1", "--cwd", t.TempDir(), "--json", file)), &rep); err != nil {
		t.Fatal(err)
	}
	wantSub := map[string]string{"kind": "sidechain", "parent_native_id": "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358", "call_id": "toolu_01JA2mLseQCAW3MdwPE4qWEk"}
	if len(rep.Workers) != 1 || !reflect.DeepEqual(rep.Workers[0].Subagent, wantSub) || rep.Workers[0].Messages == 0 || rep.Skipped["sub-agent record"] != 0 {
		t.Fatalf("report %+v; want one worker %v with the run's messages, no sub-agent record left out", rep, wantSub)
	}
	w, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: rep.Workers[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	if w.ParentId != rep.ID || !w.Subagent || w.ParentCallId != wantSub["call_id"] {
		t.Fatalf("the run's session: parent %q, subagent %v, call %q; want a worker of %s started by %s", w.ParentId, w.Subagent, w.ParentCallId, rep.ID, wantSub["call_id"])
	}
	_, errOut, code := r.cli.run("import", "--agent", "claude", "--node", "n1", "--cwd", t.TempDir(), file)
	want := "sidechain_integrated.jsonl held a subagent's run (sidechain, started by tool call toolu_01JA2mLseQCAW3MdwPE4qWEk): imported as worker "
	if code != 0 || !strings.Contains(errOut, want) {
		t.Fatalf("exit %d; human report lacks %q:\n%s", code, want, errOut)
	}
}
