package crossagent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/agents/codecs"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// The subagent conversation: the user asks for a helper, the main agent
// starts a subagent with its own tool (MARKER-SUBTASK is the task), the
// subagent runs a shell command of its own (MARKER-SUBIN: only ever in the
// subagent's run) and answers (MARKER-SUBDONE, which the main chain gets as
// the tool's result), and the main agent closes the turn.
const (
	subPrompt  = "MARKER-SA1 ask a helper to read the notes"
	subTask    = "MARKER-SUBTASK read the notes"
	subInner   = "MARKER-SUBIN"
	subInCmd   = "printf MARKER-SUBIN-%s OUT"
	subDone    = "MARKER-SUBDONE the notes are fine"
	subAnswer  = "MARKER-SA2 the helper reported back"
	subNewTurn = "MARKER-SNEW what did the helper say?"
)

// spawnCalls are the calls that start a subagent in each CLI that has
// one, with the argument names its schema asks for. Codex offers its
// sub-agent tools in the Responses namespace multi_agent_v1 and hands the
// run's answer back through wait_agent.
var spawnCalls = map[string]fakemodel.ToolCall{
	"claude":   {Name: "Agent", Input: map[string]any{"description": "read notes", "prompt": subTask, "subagent_type": "general-purpose"}},
	"codex":    {Name: "spawn_agent", Namespace: "multi_agent_v1", Input: map[string]any{"message": subTask}},
	"gemini":   {Name: "invoke_agent", Input: map[string]any{"agent_name": "generalist", "prompt": subTask}},
	"opencode": {Name: "task", Input: map[string]any{"description": "read notes", "prompt": subTask, "subagent_type": "general"}},
}

var agentIDRE = regexp.MustCompile(`"agent_id"\s*:\s*"([^"]+)"`)

// subagentPolicy answers the real source CLI of agent: the main session
// spawns the subagent, the subagent (its requests carry the task as their
// user text) runs its shell command and finishes, and the main session
// answers once the subagent's result is back.
func subagentPolicy(agent string) func(fakemodel.Request) fakemodel.Reply {
	return func(r fakemodel.Request) fakemodel.Reply {
		sub, results, done := false, 0, false
		for _, it := range r.Items {
			sub = sub || (it.Role == "user" && it.Kind == fakemodel.KindText && strings.Contains(it.Text, "MARKER-SUBTASK"))
			if it.Kind == fakemodel.KindToolResult {
				results++
				done = done || strings.Contains(it.Text, "MARKER-SUBDONE")
			}
		}
		last := r.Items[len(r.Items)-1]
		switch {
		case sub && results == 0:
			return fakemodel.Reply{Shell: subInCmd}
		case sub && agent == "gemini": // a Gemini subagent ends by calling complete_task
			return fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: "complete_task", Input: map[string]any{"result": map[string]any{"response": subDone}}}}
		case sub:
			return fakemodel.Reply{Text: subDone}
		case done:
			return fakemodel.Reply{Text: subAnswer}
		case last.Kind == fakemodel.KindToolResult && agentIDRE.MatchString(last.Text):
			id := agentIDRE.FindStringSubmatch(last.Text)[1]
			return fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: "wait_agent", Namespace: "multi_agent_v1", Input: map[string]any{"targets": []string{id}, "timeout_ms": 60000}}}
		case strings.Contains(fakemodel.LastUserText(r.Items), "MARKER-SA1"):
			call := spawnCalls[agent]
			return fakemodel.Reply{Tool: &call}
		}
		return fakemodel.Reply{Text: "MARKER-SX nothing to do"}
	}
}

// TestMatrixSubagent: a conversation whose main chain started a subagent
// carries over whole, and the subagent's own run neither leaks into it nor
// is lost. The source is the real CLI's own files where it can spawn one
// here: Claude (Agent tool; the run in <session>/subagents/agent-*.jsonl),
// Codex (spawn_agent and wait_agent; the run a rollout of its own whose
// session_meta names the spawning thread), Gemini (invoke_agent of its
// generalist; the run a kind "subagent" session under chats/<parent>/) and
// OpenCode (task; the run a child session, read from `opencode export`).
// pi has no subagent tool (its example extension runs `pi --no-session`,
// so no file of the run exists, and keeps the run's messages in its tool
// result's details): its source is the same conversation written with pi's
// writer, a `subagent` tool call and its result, the run put into the
// result's details in the extension's shape and read back with ReadRuns.
//
// For each source the neutral copy of the main session must hold the
// spawning call, its result (the subagent's answer) and the closing text,
// and none of the subagent's own messages; the run's file must read as a
// subagent's run (agents.SubagentReader) naming the main session as its
// parent and (all but OpenCode's) the spawning call, with its own
// messages, as `cast import` and node adoption keep it: a worker of the
// main session.
// Then each real target CLI resumes the main session: its model must get
// the user's request, the spawning call, the subagent's answer as that
// call's result, the closing text and the new prompt in order, and nothing
// of the subagent's own run.
func TestMatrixSubagent(t *testing.T) {
	matrix(t, ring(subagentShift), produceSubagent, func(t *testing.T, src, tgt string, msgs []transcript.Message) {
		if err := receivedSubagent(writeAndResume(t, src, tgt, msgs, subNewTurn, nil)); err != nil {
			t.Fatalf("%s->%s: %v", src, tgt, err)
		}
	})
}

// produceSubagent has agent's real CLI (pi: its writer) hold the subagent
// conversation, checks the main session and the run as read back, and
// returns the main session's neutral messages.
func produceSubagent(t *testing.T, agent string) []transcript.Message {
	if agent == "pi" {
		return producePiSubagent(t)
	}
	c := newCLI(t, agent, "sub-"+agent, false)
	c.fake.SetPolicy(subagentPolicy(agent))
	main, run := runSpawn(t, c)
	r, err := codecs.Reader(agent)
	if err != nil {
		t.Fatal(err)
	}
	rr, ok := r.(agents.ReportingReader)
	if !ok {
		t.Fatalf("%s's reader does not report what it leaves out", agent)
	}
	msgs, skipped, err := rr.ReadReport(main)
	if err != nil {
		t.Fatalf("%s reader on %s: %v", agent, main, err)
	}
	t.Logf("%s main session, read from %s (skipped %v):\n%s", agent, main, skipped, brief(msgs))
	callID := checkMainChain(t, agent, msgs, skipped)
	checkRun(t, c, r, main, run, callID)
	return msgs
}

// runSpawn runs the source CLI once and returns the main session's file
// and the subagent run's file (for OpenCode: their exports).
func runSpawn(t *testing.T, c *cli) (main, run string) {
	vars := map[string]string{"prompt": subPrompt}
	switch c.agent {
	case "claude":
		const sid = "7c1e2d3f-4a5b-4c6d-8e7f-8091a2b3c4d5"
		vars["id"] = sid
		c.run(t, c.cmds.Headless, vars, "--allowedTools", "Bash,Agent")
		dir := claude.ProjectDir(c.nativeHome(), c.cwd)
		return filepath.Join(dir, sid+".jsonl"), one(t, filepath.Join(dir, sid, "subagents", "agent-*.jsonl"))
	case "codex":
		res := c.run(t, c.cmds.Headless, vars)
		m := regexp.MustCompile(`"thread_id":"([0-9a-f-]{36})"`).FindStringSubmatch(res.Stdout)
		if m == nil {
			t.Fatalf("codex printed no thread id:\n%s", res.Stdout)
		}
		files, _ := filepath.Glob(filepath.Join(c.nativeHome(), "sessions", "*", "*", "*", "rollout-*.jsonl"))
		for _, f := range files {
			if strings.HasSuffix(f, m[1]+".jsonl") {
				main = f
			} else {
				run = f
			}
		}
		if main == "" || run == "" || len(files) != 2 {
			t.Fatalf("want the thread's rollout and one spawned thread's, got %q", files)
		}
		return main, run
	case "gemini":
		const sid = "3d4c5b6a-7980-4a1b-9c2d-3e4f5a6b7c8d"
		vars["id"] = sid
		c.run(t, c.cmds.Headless, vars, "--yolo")
		chats := filepath.Join(c.nativeHome(), "tmp", "*", "chats")
		return holding(t, filepath.Join(chats, "session-*.jsonl"), "MARKER-SA1"), one(t, filepath.Join(chats, sid, "*.jsonl"))
	case "opencode":
		res := c.run(t, c.cmds.Headless, vars)
		var ids []string // the session's, then its child's (named in the task's output)
		for _, id := range regexp.MustCompile(`ses_[A-Za-z0-9]+`).FindAllString(res.Stdout, -1) {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		if len(ids) != 2 {
			t.Fatalf("want the session's id and its child's in opencode's output, got %q:\n%s", ids, res.Stdout)
		}
		return c.export(t, ids[0]), c.export(t, ids[1])
	}
	t.Fatalf("no subagent recipe for %s", c.agent)
	return "", ""
}

// export writes what `opencode export id` prints to a file.
func (c *cli) export(t *testing.T, id string) string {
	exp := c.run(t, []string{"export", "{id}"}, map[string]string{"id": id})
	path := filepath.Join(t.TempDir(), id+".json")
	if err := os.WriteFile(path, []byte(exp.Stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// producePiSubagent writes the subagent conversation with pi's writer and
// puts the run into the tool result's details, where pi's example subagent
// extension keeps it (results[].messages: the extension runs the subagent
// as `pi --no-session`, so no file of the run exists); the main chain is
// read as `cast import` reads it, and the run with ReadRuns.
func producePiSubagent(t *testing.T) []transcript.Message {
	home, env := agenttest.Env(t, "pi", "http://127.0.0.1:1")
	w, err := codecs.Writer("pi", codecs.WriterOptions{Env: env})
	if err != nil {
		t.Fatal(err)
	}
	written, err := w.Write(agents.Target{Home: agenttest.NativeHome(home, "pi"), Cwd: filepath.Join(home, "work", "src"),
		SessionID: "subagent-pi", Model: targetModel("pi")}, handSubagentConversation())
	if err != nil {
		t.Fatalf("pi writer: %v", err)
	}
	putPiRun(t, written.Path)
	r, err := codecs.Reader("pi")
	if err != nil {
		t.Fatal(err)
	}
	msgs, skipped, err := r.(agents.ReportingReader).ReadReport(written.Path)
	if err != nil {
		t.Fatalf("pi reader: %v", err)
	}
	t.Logf("pi main session (skipped %v):\n%s", skipped, brief(msgs))
	callID := checkMainChain(t, "pi", msgs, skipped)
	runs, err := agents.ReadRuns(r, written.Path)
	if err != nil || len(runs) != 1 {
		t.Fatalf("pi: %d runs read from the session, %v; want the one its tool result keeps", len(runs), err)
	}
	checkRunHolds(t, "pi", runs[0].Subagent, runs[0].Messages, sessionID(t, "pi", written.Path), callID)
	return msgs
}

// putPiRun adds the subagent's run to the details of the tool result in
// the pi session at path, in pi's own message shape.
func putPiRun(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := func(s string) []any { return []any{map[string]any{"type": "text", "text": s}} }
	run := []any{
		map[string]any{"role": "user", "content": text("Task: " + subTask), "timestamp": 1796032803000},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "toolCall", "id": "call_in1", "name": "bash",
			"arguments": map[string]any{"command": subInCmd}}}, "provider": "fake", "model": "fake-model", "stopReason": "toolUse", "timestamp": 1796032803500},
		map[string]any{"role": "toolResult", "toolCallId": "call_in1", "toolName": "bash", "content": text(subInner + "-OUT"), "isError": false, "timestamp": 1796032804000},
		map[string]any{"role": "assistant", "content": text(subDone), "provider": "fake", "model": "fake-model", "stopReason": "stop", "timestamp": 1796032804500},
	}
	lines := strings.Split(string(data), "\n")
	found := false
	for i, l := range lines {
		var e map[string]any
		if json.Unmarshal([]byte(l), &e) != nil {
			continue
		}
		m, _ := e["message"].(map[string]any)
		if m["role"] != "toolResult" {
			continue
		}
		m["details"] = map[string]any{"mode": "single", "results": []any{map[string]any{"agent": "worker", "task": subTask, "exitCode": 0, "messages": run}}}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		lines[i], found = string(b), true
	}
	if !found {
		t.Fatalf("pi's writer wrote no tool result in %s", path)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
}

// handSubagentConversation is the conversation for an agent that cannot
// spawn here: a subagent tool call answered by the subagent's reply.
func handSubagentConversation() []transcript.Message {
	return stamp([]transcript.Message{
		{Kind: transcript.KindUser, Text: subPrompt},
		{Kind: transcript.KindToolCall, Model: "claude-sonnet-4-5", ToolCall: &transcript.ToolCall{ID: "toolu_SUB1", Name: "subagent",
			Input: `{"agent":"worker","task":"` + subTask + `"}`}},
		{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "toolu_SUB1", Output: subDone}},
		{Kind: transcript.KindAssistant, Text: subAnswer, Model: "claude-sonnet-4-5"},
	}, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
}

// checkMainChain asserts the main session's neutral copy holds the
// request, the spawning call, a result carrying the subagent's answer, the
// closing text, and nothing of the run; it returns the spawning call's id.
func checkMainChain(t *testing.T, agent string, msgs []transcript.Message, skipped map[string]int) string {
	t.Helper()
	var callID string
	step := 0 // 0: request, 1: spawning call, 2: its answer, 3: closing text, 4: done
	for _, m := range msgs {
		if strings.Contains(m.Text, subInner) || (m.ToolCall != nil && strings.Contains(m.ToolCall.Input, subInner)) ||
			(m.ToolResult != nil && strings.Contains(m.ToolResult.Output, subInner)) {
			t.Fatalf("%s's main session holds the subagent's own run (%s):\n%s", agent, m.Kind, brief(msgs))
		}
		switch {
		case step == 0 && m.Kind == transcript.KindUser && strings.Contains(m.Text, "MARKER-SA1"):
			step = 1
		case step == 1 && m.Kind == transcript.KindToolCall && strings.Contains(m.ToolCall.Input, "MARKER-SUBTASK"):
			callID, step = m.ToolCall.ID, 2
		case step == 2 && m.Kind == transcript.KindToolResult && strings.Contains(m.ToolResult.Output, "MARKER-SUBDONE"):
			step = 3
		case step == 3 && m.Kind == transcript.KindAssistant && strings.Contains(m.Text, "MARKER-SA2"):
			step = 4
		}
	}
	if step != 4 {
		t.Fatalf("%s's main session is not the conversation the CLI held (stage %d):\n%s", agent, step, brief(msgs))
	}
	t.Logf("%s main session left out %v", agent, skipped)
	return callID
}

// checkRun asserts the run's file reads as a subagent's run of the main
// session, with the subagent's own messages.
func checkRun(t *testing.T, c *cli, r agents.Reader, main, run, callID string) {
	t.Helper()
	sub, ok, err := agents.ReadSubagent(r, run)
	if err != nil || !ok {
		t.Fatalf("%s: %s does not read as a subagent's run (%v, %v)", c.agent, run, ok, err)
	}
	// OpenCode's child session does not name the call (the parent's task
	// part names the child); every other run does.
	if c.agent != "opencode" && sub.CallID == "" {
		t.Errorf("%s: the run does not name the spawning call", c.agent)
	}
	msgs, err := r.Read(run)
	if err != nil {
		t.Fatalf("%s reader on the run %s: %v", c.agent, run, err)
	}
	t.Logf("%s subagent run, read from %s:", c.agent, run)
	checkRunHolds(t, c.agent, sub, msgs, mainID(t, c, main), callID)
}

// checkRunHolds asserts a run names the main session (and, where it names
// one, the spawning call) and holds the subagent's task, its own tool
// call's output and its answer.
func checkRunHolds(t *testing.T, agent string, sub agents.Subagent, msgs []transcript.Message, parent, callID string) {
	t.Helper()
	t.Logf("%s subagent run %+v:\n%s", agent, sub, brief(msgs))
	if sub.ParentNativeID != parent {
		t.Errorf("%s: the run names parent %q, want the main session %q", agent, sub.ParentNativeID, parent)
	}
	if sub.CallID != "" && sub.CallID != callID {
		t.Errorf("%s: the run names call %q, want the spawning call %q", agent, sub.CallID, callID)
	}
	var text strings.Builder
	for _, m := range msgs {
		text.WriteString(m.Text + "\n")
		if m.ToolCall != nil {
			text.WriteString(m.ToolCall.Input + "\n")
		}
		if m.ToolResult != nil {
			text.WriteString(m.ToolResult.Output + "\n")
		}
	}
	for _, want := range []string{"MARKER-SUBTASK", subInner + "-OUT", "MARKER-SUBDONE"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("%s: the run as read lacks %s", agent, want)
		}
	}
}

// mainID is the main session's native id, as the run names its parent.
func mainID(t *testing.T, c *cli, main string) string {
	if c.agent == "opencode" { // an export, not a file of OpenCode's
		return regexp.MustCompile(`ses_[A-Za-z0-9]+`).FindString(filepath.Base(main))
	}
	return sessionID(t, c.agent, main)
}

// sessionID is agent's native id of the session in path.
func sessionID(t *testing.T, agent, path string) string {
	a, _ := agents.Lookup(agent)
	d, ok := a.Driver()
	if !ok {
		t.Fatalf("%s has no driver", agent)
	}
	return d.SessionID(path)
}

// receivedSubagent checks the target's model got the main chain in order
// and nothing of the subagent's own run.
func receivedSubagent(items []fakemodel.Item) error {
	var spawn fakemodel.Item
	steps := []step{
		{"the user's request", func(it fakemodel.Item) bool {
			return it.Kind == fakemodel.KindText && it.Role == "user" && strings.Contains(it.Text, "MARKER-SA1")
		}},
		{"the spawning call", func(it fakemodel.Item) bool {
			if it.Kind == fakemodel.KindToolCall && strings.Contains(it.ToolInput, "MARKER-SUBTASK") {
				spawn = it
				return true
			}
			return false
		}},
		{"the subagent's answer as a tool result", func(it fakemodel.Item) bool {
			return it.Kind == fakemodel.KindToolResult && strings.Contains(it.Text, "MARKER-SUBDONE")
		}},
		{"the closing text", func(it fakemodel.Item) bool {
			return it.Kind == fakemodel.KindText && it.Role == "assistant" && strings.Contains(it.Text, "MARKER-SA2")
		}},
		{"the new prompt", func(it fakemodel.Item) bool {
			return it.Kind == fakemodel.KindText && it.Role == "user" && strings.Contains(it.Text, "MARKER-SNEW")
		}},
	}
	if n, _ := inOrder(items, steps); n < len(steps) {
		return fmt.Errorf("the model did not receive %s in order; it got:\n%s", steps[n].what, dump(items))
	}
	for _, it := range items {
		if strings.Contains(it.Text, subInner) || strings.Contains(it.ToolInput, subInner) {
			return fmt.Errorf("the subagent's own run leaked into the main chain (%s); spawned by %s", it.String(), spawn.String())
		}
	}
	return nil
}
