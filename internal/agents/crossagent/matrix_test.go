package crossagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/agents/codecs"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// runnable are the agents whose real CLI is installed and driven here.
var runnable = []string{"claude", "codex", "gemini", "pi", "opencode"}

const (
	// maxConcurrent bounds how many CLI sessions run at once: the CLIs are
	// node programs and CI machines have few cores.
	maxConcurrent = 3
	// runTimeout bounds every CLI process; a CLI that hangs on a transcript
	// it dislikes fails its pair instead of the whole run.
	runTimeout = 150 * time.Second
)

// The conversation every source CLI holds. The first turn makes the fake
// ask for a shell call whose output (MARKER-OUT) differs from its command
// text (printf MARKER-%s OUT), so a result that merely repeats the command
// does not count as the output arriving.
const (
	prompt1   = "MARKER-U1 please " + fakemodel.ToolTrigger + " CMD[" + shellCmd + "]"
	shellCmd  = "printf MARKER-%s OUT"
	shellOut  = "MARKER-OUT"
	prompt2   = "MARKER-U2 and what does that mean?"
	newPrompt = "MARKER-NEW what did we do so far?"
)

var slots = make(chan struct{}, maxConcurrent)

// slot takes one of the maxConcurrent places until the test ends.
func slot(t *testing.T) {
	slots <- struct{}{}
	t.Cleanup(func() { <-slots })
}

// source is one source agent's conversation, produced once per test run by
// whichever of its pairs needs it first, so the other agents' pairs need
// not wait for the slowest source.
type source struct {
	once sync.Once
	make func(t *testing.T, agent string) []transcript.Message
	msgs []transcript.Message // nil when producing it failed
	by   string               // the subtest that produced it
}

// get returns the conversation of agent, producing it on first use. Only
// the producer holds a concurrency slot meanwhile; the others just wait.
func (s *source) get(t *testing.T, agent string) []transcript.Message {
	t.Helper()
	s.once.Do(func() {
		s.by = t.Name()
		slots <- struct{}{}
		defer func() { <-slots }()
		t.Logf("producing the %s source conversation for every %s->* pair", agent, agent)
		s.msgs = s.make(t, agent)
	})
	if s.msgs == nil {
		t.Fatalf("no %s conversation to carry over: producing it failed in %s (see its log)", agent, s.by)
	}
	return s.msgs
}

// TestMatrix: a conversation the real source CLI produced reaches the model
// whole when the real target CLI resumes it: by default each in one other
// agent's, and its own where its package does not resume one
// (matrixPairs); every pair with CAST_MATRIX=full (see the package doc).
func TestMatrix(t *testing.T) {
	matrix(t, matrixPairs(), func(t *testing.T, agent string) []transcript.Message {
		msgs := produce(t, agent)
		checkSource(t, agent, msgs)
		return msgs
	}, resume)
}

// matrix runs the source->target pairs that pairs selects, in parallel:
// make produces each source's conversation once, check resumes it in the
// target.
func matrix(t *testing.T, pairs pairSet, make func(t *testing.T, agent string) []transcript.Message, check func(t *testing.T, src, tgt string, msgs []transcript.Message)) {
	start := time.Now()
	sources := map[string]*source{}
	for _, a := range runnable {
		sources[a] = &source{make: make}
	}
	for i, src := range runnable {
		for j, tgt := range runnable {
			if !pairs.has(i, j) {
				continue
			}
			t.Run(src+"->"+tgt, func(t *testing.T) {
				t.Parallel()
				msgs := sources[src].get(t, src)
				slot(t)
				check(t, src, tgt, msgs)
			})
		}
	}
	t.Cleanup(func() { t.Logf("%s took %s", t.Name(), time.Since(start).Round(time.Second)) })
}

// cli runs one agent's real CLI in an isolated home against a fake model.
type cli struct {
	agent string
	bin   string
	fake  *fakemodel.Server
	home  string // $HOME
	env   []string
	cwd   string
	cmds  agents.Commands
}

func newCLI(t *testing.T, agent, dir string, strict bool) *cli {
	t.Helper()
	a, ok := agents.Lookup(agent)
	if !ok {
		t.Fatalf("agent %q is not registered", agent)
	}
	fake := fakemodel.Start(t)
	fake.SetStrict(strict)
	home, env := agenttest.Env(t, agent, fake.URL)
	cwd := filepath.Join(home, "work", dir)
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	return &cli{agent: agent, bin: agenttest.Bin(t, agent), fake: fake, home: home, env: env, cwd: cwd, cmds: a.Commands}
}

func (c *cli) nativeHome() string { return agenttest.NativeHome(c.home, c.agent) }

// run runs the CLI with the template expanded and extra arguments after it,
// failing the test unless it exits 0 within runTimeout.
func (c *cli) run(t *testing.T, tmpl []string, vars map[string]string, extra ...string) agenttest.Result {
	t.Helper()
	if tmpl == nil {
		t.Fatalf("%s has no such command in the registry", c.agent)
	}
	args, err := agents.Expand(tmpl, vars)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	// The prompt goes where the runner puts it: stdin, for a CLI that reads it there.
	var input *string
	if p, ok := vars["prompt"]; ok && c.cmds.PromptStdin {
		input = &p
	}
	return agenttest.MustRunInput(t, ctx, c.bin, append(args, extra...), c.env, c.cwd, input)
}

// produce has the real CLI of agent hold the two-turn conversation with the
// registry's headless and resume commands, and reads its native transcript
// into neutral messages with the agent's reader.
func produce(t *testing.T, agent string) []transcript.Message {
	// Not strict: this is the CLI continuing its own session, which cast
	// has not touched (Gemini CLI 0.61 resends a tool result twice when it
	// resumes a session it wrote itself).
	c := newCLI(t, agent, "src-"+agent, false)
	var native string
	switch agent {
	case "claude":
		const sid = "5b0f8a7e-3c2d-4e1f-9a8b-7c6d5e4f3a2b"
		c.run(t, c.cmds.Headless, map[string]string{"prompt": prompt1, "id": sid}, "--allowedTools", "Bash")
		c.run(t, c.cmds.Resume, map[string]string{"prompt": prompt2, "id": sid})
		native = filepath.Join(claude.ProjectDir(c.nativeHome(), c.cwd), sid+".jsonl")
	case "codex":
		res := c.run(t, c.cmds.Headless, map[string]string{"prompt": prompt1})
		m := regexp.MustCompile(`"thread_id":"([0-9a-f-]{36})"`).FindStringSubmatch(res.Stdout)
		if m == nil {
			t.Fatalf("codex printed no thread id:\n%s", res.Stdout)
		}
		c.run(t, c.cmds.Resume, map[string]string{"prompt": prompt2, "id": m[1]})
		native = one(t, filepath.Join(c.nativeHome(), "sessions", "*", "*", "*", "rollout-*-"+m[1]+".jsonl"))
	case "gemini":
		const sid = "8e7d6c5b-4a39-4281-b7c6-d5e4f3a2b1c0"
		// Headless mode refuses the shell tool unless approvals are off.
		c.run(t, c.cmds.Headless, map[string]string{"prompt": prompt1, "id": sid}, "--yolo")
		first := one(t, filepath.Join(c.nativeHome(), "tmp", "*", "chats", "session-*-"+sid[:8]+".jsonl"))
		// The registry's resume form, as production runs it (--resume ID).
		c.run(t, c.cmds.Resume, map[string]string{"prompt": prompt2, "id": sid, "path": first})
		native = holding(t, filepath.Join(c.nativeHome(), "tmp", "*", "chats", "session-*.jsonl"), "MARKER-U2")
	case "pi":
		c.run(t, c.cmds.Headless, map[string]string{"prompt": prompt1},
			"--provider", agenttest.FakeProvider, "--model", agenttest.FakeModel)
		native = one(t, filepath.Join(c.nativeHome(), "sessions", "*", "*.jsonl"))
		c.run(t, c.cmds.Resume, map[string]string{"prompt": prompt2, "path": native})
	case "opencode":
		res := c.run(t, c.cmds.Headless, map[string]string{"prompt": prompt1}) // the form has --format json
		id := regexp.MustCompile(`ses_[A-Za-z0-9]+`).FindString(res.Stdout)
		if id == "" {
			t.Fatalf("opencode printed no session id:\n%s", res.Stdout)
		}
		c.run(t, c.cmds.Resume, map[string]string{"prompt": prompt2, "id": id})
		exp := c.run(t, []string{"export", "{id}"}, map[string]string{"id": id})
		native = filepath.Join(t.TempDir(), "export.json")
		if err := os.WriteFile(native, []byte(exp.Stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("no source recipe for %s", agent)
	}
	r, err := codecs.Reader(agent)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.Read(native)
	if err != nil {
		t.Fatalf("%s reader on %s: %v", agent, native, err)
	}
	t.Logf("%s source, read from %s:\n%s", agent, native, brief(msgs))
	return msgs
}

// checkSource asserts the neutral copy holds the whole conversation: both
// user turns, the shell call with its result (paired by id) and the
// assistant texts after it, in order.
func checkSource(t *testing.T, agent string, msgs []transcript.Message) {
	t.Helper()
	var users, calls, results, texts int
	var callID string
	step := 0 // 0: want U1, 1: call, 2: result, 3: text, 4: U2, 5: text, 6: done
	for _, m := range msgs {
		switch m.Kind {
		case transcript.KindUser:
			users++
			switch {
			case step == 0 && strings.Contains(m.Text, "MARKER-U1"):
				step = 1
			case step == 4 && strings.Contains(m.Text, "MARKER-U2"):
				step = 5
			}
		case transcript.KindToolCall:
			calls++
			if step == 1 && strings.Contains(m.ToolCall.Input, shellCmd) {
				callID, step = m.ToolCall.ID, 2
			}
		case transcript.KindToolResult:
			results++
			if step == 2 && m.ToolResult.CallID == callID && strings.Contains(m.ToolResult.Output, shellOut) {
				step = 3
			}
		case transcript.KindAssistant:
			if strings.TrimSpace(m.Text) == "" {
				continue
			}
			texts++
			if step == 3 || step == 5 {
				step++
			}
		}
	}
	if step != 6 || users != 2 || calls != 1 || results != 1 || texts < 2 {
		t.Fatalf("%s's neutral copy is not the conversation the CLI held (stage %d; %d user, %d call, %d result, %d assistant text):\n%s",
			agent, step, users, calls, results, texts, brief(msgs))
	}
}

// resume writes msgs for tgt in a fresh home, resumes the real tgt CLI with
// a new prompt and checks what the model received.
func resume(t *testing.T, src, tgt string, msgs []transcript.Message) {
	items := writeAndResume(t, src, tgt, msgs, newPrompt, nil)
	wants := wantsFor(msgs)
	if len(wants) < 6 {
		t.Fatalf("the %s conversation is too small to prove anything: %d items", src, len(wants))
	}
	wants = append(wants, want{kind: fakemodel.KindText, role: "user", has: "MARKER-NEW"})
	if err := received(items, wants, "MARKER-NEW"); err != nil {
		t.Fatal(err)
	}
}

// writeAndResume writes msgs with tgt's writer into a fresh home (after
// setup, when given, has adjusted the CLI's home), resumes the real tgt CLI
// with prompt against a strict fake and returns the items of the last
// conversation request the fake recorded.
func writeAndResume(t *testing.T, src, tgt string, msgs []transcript.Message, prompt string, setup func(c *cli)) []fakemodel.Item {
	// Strict: the pairing cast wrote must be what a real API accepts.
	c := newCLI(t, tgt, "proj", true)
	if setup != nil {
		setup(c)
	}
	opts := codecs.WriterOptions{Env: c.env}
	if tgt == "opencode" {
		opts.Bin = c.bin
	}
	w, err := codecs.Writer(tgt, opts)
	if err != nil {
		t.Fatal(err)
	}
	written, err := w.Write(agents.Target{Home: c.nativeHome(), Cwd: c.cwd, SessionID: "cross-" + src + "-" + tgt, Model: targetModel(tgt)}, msgs)
	if err != nil {
		t.Fatalf("%s writer: %v", tgt, err)
	}
	res := c.run(t, c.cmds.Resume, map[string]string{"prompt": prompt, "id": written.NativeID, "path": written.Path})
	turns := c.fake.Turns()
	if len(turns) == 0 {
		t.Fatalf("%s sent no conversation request\nstdout:\n%s\nstderr:\n%s", tgt, res.Stdout, res.Stderr)
	}
	items := turns[len(turns)-1].Items
	t.Logf("%s's last request, from %s's conversation:\n%s", tgt, src, dump(items))
	return items
}

// targetModel is the model a writer records for agent: pi and OpenCode
// name it provider/model.
func targetModel(agent string) string {
	if agent == "pi" || agent == "opencode" {
		return agenttest.FakeProvider + "/" + agenttest.FakeModel
	}
	return agenttest.FakeModel
}

// want is one item the model must receive.
type want struct {
	kind string // fakemodel.Kind*
	role string // "" for tool results (Anthropic sends them as user, others as tool)
	has  string // substring of the text, or of the tool input for a call
	pair bool   // a tool result that must answer the call matched before it
}

var markerRE = regexp.MustCompile(`MARKER-[A-Z0-9]+`)

// wantsFor is what the model must receive for a neutral conversation:
// every user turn (by its marker: targets may escape or quote user text),
// every assistant text (its first line), every tool call (by its command)
// and its result (by the output's marker, answering that call).
func wantsFor(msgs []transcript.Message) []want {
	var ws []want
	for _, m := range msgs {
		switch m.Kind {
		case transcript.KindUser:
			ws = append(ws, want{kind: fakemodel.KindText, role: "user", has: probe(m.Text)})
		case transcript.KindAssistant:
			if strings.TrimSpace(m.Text) == "" {
				continue
			}
			first, _, _ := strings.Cut(strings.TrimSpace(m.Text), "\n")
			ws = append(ws, want{kind: fakemodel.KindText, role: "assistant", has: clip(first, 40)})
		case transcript.KindToolCall:
			has := m.ToolCall.Name
			if strings.Contains(m.ToolCall.Input, shellCmd) {
				has = shellCmd
			}
			ws = append(ws, want{kind: fakemodel.KindToolCall, role: "assistant", has: has})
		case transcript.KindToolResult:
			ws = append(ws, want{kind: fakemodel.KindToolResult, has: probe(m.ToolResult.Output), pair: true})
		}
	}
	return ws
}

func probe(s string) string {
	if m := markerRE.FindString(s); m != "" {
		return m
	}
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return clip(first, 30)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func (w want) match(it fakemodel.Item, call *fakemodel.Item) bool {
	if it.Kind != w.kind || (w.role != "" && it.Role != w.role) {
		return false
	}
	s := it.Text
	if it.Kind == fakemodel.KindToolCall {
		s = it.ToolName + " " + it.ToolInput
	}
	if !strings.Contains(s, w.has) {
		return false
	}
	if w.pair {
		if call == nil {
			return false
		}
		switch {
		case it.ToolCallID != "" && call.ToolCallID != "":
			return it.ToolCallID == call.ToolCallID
		case it.ToolName != "" && call.ToolName != "":
			return it.ToolName == call.ToolName
		}
	}
	return true
}

// received checks what the model received against wants: each want in
// this order, each tool result answering the call matched last, and the
// newest user text holding last (the new prompt).
func received(items []fakemodel.Item, wants []want, last string) error {
	at := 0
	var call *fakemodel.Item
	for n, w := range wants {
		found := false
		for ; at < len(items); at++ {
			if w.match(items[at], call) {
				if items[at].Kind == fakemodel.KindToolCall {
					call = &items[at]
				}
				found = true
				at++
				break
			}
		}
		if !found {
			return fmt.Errorf("the model did not receive want %d of %d %+v in order; it got:\n%s", n+1, len(wants), w, dump(items))
		}
	}
	if got := fakemodel.LastUserText(items); !strings.Contains(got, last) {
		return fmt.Errorf("the newest user text is %q, not the new prompt %q; the model got:\n%s", got, last, dump(items))
	}
	return nil
}

// one is the single file matching pattern.
func one(t *testing.T, pattern string) string {
	t.Helper()
	files, _ := filepath.Glob(pattern)
	if len(files) != 1 {
		t.Fatalf("%d files match %s, want 1: %q", len(files), pattern, files)
	}
	return files[0]
}

// holding is the largest file matching pattern that contains s.
func holding(t *testing.T, pattern, s string) string {
	t.Helper()
	files, _ := filepath.Glob(pattern)
	best, size := "", -1
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), s) && len(b) > size {
			best, size = f, len(b)
		}
	}
	if best == "" {
		t.Fatalf("no file matching %s holds %q (files: %q)", pattern, s, files)
	}
	return best
}

func brief(msgs []transcript.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		s := m.Kind.String()
		switch m.Kind {
		case transcript.KindToolCall:
			s += " " + m.ToolCall.ID + " " + m.ToolCall.Name + " " + m.ToolCall.Input
		case transcript.KindToolResult:
			s += " " + m.ToolResult.CallID + " " + strings.ReplaceAll(m.ToolResult.Output, "\n", `\n`)
		default:
			s += " " + strings.ReplaceAll(m.Text, "\n", `\n`)
		}
		b.WriteString("  " + clip(s, 200) + "\n")
	}
	return b.String()
}

func dump(items []fakemodel.Item) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString("  " + clip(it.String(), 200) + "\n")
	}
	return b.String()
}
