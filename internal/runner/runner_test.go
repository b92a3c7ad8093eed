package runner_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/transcript"
)

// turnTimeout bounds every turn a test runs (the CLIs take 2-30 s here).
const turnTimeout = 3 * time.Minute

// agentCase is how each real CLI is driven in the tests.
type agentCase struct {
	agent string
	model string
	args  []string // approval settings the tool call needs headless
	// exitCode: the agent records the shell's exit status on the result.
	exitCode bool
	// callFirst: the native transcript holds the tool call while the tool
	// runs (gemini writes the call with its result; opencode streams a
	// tool part once it completed).
	callFirst bool
}

var cases = []agentCase{
	{agent: "claude", args: []string{"--allowedTools", "Bash"}, exitCode: true, callFirst: true},
	{agent: "codex", exitCode: true, callFirst: true},
	{agent: "gemini", args: []string{"--yolo"}},
	{agent: "pi", model: agenttest.FakeProvider + "/" + agenttest.FakeModel, callFirst: true},
	{agent: "opencode", model: agenttest.FakeProvider + "/" + agenttest.FakeModel, exitCode: true},
}

// delayProxy sits between a CLI and the fake model on 127.0.0.1 and holds
// the requests delay picks before passing them on.
type delayProxy struct {
	URL   string
	mu    sync.Mutex
	delay func(body []byte) time.Duration
	seen  chan struct{} // one send (non-blocking) per model request
	stop  chan struct{}
}

func startProxy(t *testing.T, target string) *delayProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{seen: make(chan struct{}, 64), stop: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // stream SSE as it comes
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Method == http.MethodPost {
			select {
			case p.seen <- struct{}{}:
			default:
			}
			p.mu.Lock()
			delay := p.delay
			p.mu.Unlock()
			if delay != nil {
				if d := delay(body); d > 0 {
					select {
					case <-time.After(d):
					case <-p.stop:
					case <-r.Context().Done():
						return
					}
				}
			}
		}
		rp.ServeHTTP(w, r)
	}))
	srv.Start() // httptest listens on 127.0.0.1
	p.URL = srv.URL
	t.Cleanup(func() {
		close(p.stop)
		srv.CloseClientConnections()
		srv.Close()
	})
	return p
}

func (p *delayProxy) setDelay(f func(body []byte) time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = f
}

// setup builds an isolated home for agent pointed at modelURL.
func setup(t *testing.T, c agentCase, modelURL string) (*runner.Runner, runner.Turn) {
	t.Helper()
	bin := agenttest.Bin(t, c.agent) // fails (not skips) with "run `make agents`"
	home, env := agenttest.Env(t, c.agent, modelURL)
	r := &runner.Runner{Bins: map[string]string{c.agent: bin}, Grace: 2 * time.Second, Poll: 100 * time.Millisecond, Logf: t.Logf}
	return r, runner.Turn{Agent: c.agent, Model: c.model, Cwd: t.TempDir(), Home: home, Env: env, Args: c.args}
}

type emitted struct {
	msg transcript.Message
	at  time.Time
}

func run(t *testing.T, r *runner.Runner, turn runner.Turn) (runner.Result, []emitted, time.Time, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	var got []emitted
	res, err := r.Run(ctx, turn, func(m transcript.Message) { got = append(got, emitted{m, time.Now()}) })
	end := time.Now()
	t.Logf("%s turn: %+v err=%v", turn.Agent, res, err)
	for _, e := range got {
		t.Logf("  emitted %s %s", e.msg.Kind, describe(e.msg))
	}
	return res, got, end, err
}

func describe(m transcript.Message) string {
	switch {
	case m.ToolCall != nil:
		return m.ToolCall.Name + " " + m.ToolCall.Input + " id=" + m.ToolCall.ID + " native=" + m.NativeID
	case m.ToolResult != nil:
		ec := "nil"
		if m.ToolResult.ExitCode != nil {
			ec = strconv.Itoa(int(*m.ToolResult.ExitCode))
		}
		return "call=" + m.ToolResult.CallID + " exit=" + ec + " " + strings.TrimSpace(m.ToolResult.Output) + " native=" + m.NativeID
	}
	return strings.TrimSpace(m.Text) + " native=" + m.NativeID
}

func kinds(got []emitted) []transcript.Kind {
	var out []transcript.Kind
	for _, e := range got {
		out = append(out, e.msg.Kind)
	}
	return out
}

// lastTurnText joins every item of the newest conversation request.
func lastTurnText(t *testing.T, fake *fakemodel.Server) string {
	t.Helper()
	turns := fake.Turns()
	if len(turns) == 0 {
		t.Fatal("no turn reached the model")
	}
	var b strings.Builder
	for _, it := range turns[len(turns)-1].Items {
		b.WriteString(it.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestTurns runs, for every real CLI, a fresh turn whose model reply makes
// a shell tool call and then answers, a second turn that resumes it and a
// third that resumes it by native id alone. The prompts start as a CLI
// could misread them (a question mark, a flag, a path like a slash
// command): each must reach the model as the user's text.
func TestTurns(t *testing.T) {
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			t.Parallel()
			fake := fakemodel.Start(t)
			proxy := startProxy(t, fake.URL)
			// The answer after the tool result is held back so the test
			// sees the tool messages arrive while the turn still runs.
			const hold = 2 * time.Second
			proxy.setDelay(func(body []byte) time.Duration {
				if bytes.Contains(body, []byte("tool-ran-ok")) && !bytes.Contains(body, []byte("MARKER-TWO")) {
					return hold
				}
				return 0
			})
			r, turn := setup(t, c, proxy.URL)
			turn.Prompt = "? is a question QMARK: please TOOLCALL now CMD[echo tool-ran-ok]"
			res, got, end, err := run(t, r, turn)
			if err != nil {
				t.Fatalf("first turn: %v", err)
			}
			if res.NativeID == "" || res.NativePath == "" || res.ExitCode != 0 || res.Reason != "" {
				t.Fatalf("first turn result: %+v", res)
			}
			if _, err := os.Stat(res.NativePath); err != nil {
				t.Fatalf("native path: %v", err)
			}
			if !res.PromptSeen {
				t.Errorf("the prompt was not recognised in the native transcript")
			}
			want := []transcript.Kind{transcript.KindToolCall, transcript.KindToolResult, transcript.KindAssistant}
			if k := kinds(got); !equalKinds(k, want) {
				t.Fatalf("emitted %v, want %v (prompt excluded, each once, in order)", k, want)
			}
			call, result, answer := got[0].msg, got[1].msg, got[2].msg
			if !strings.Contains(call.ToolCall.Input, "echo tool-ran-ok") {
				t.Errorf("tool call input %q", call.ToolCall.Input)
			}
			if result.ToolResult.CallID != call.ToolCall.ID || !strings.Contains(result.ToolResult.Output, "tool-ran-ok") || result.ToolResult.IsError {
				t.Errorf("tool result %+v does not answer call %s", result.ToolResult, call.ToolCall.ID)
			}
			if c.exitCode {
				if ec := result.ToolResult.ExitCode; ec == nil || *ec != 0 {
					t.Errorf("tool result exit code = %v, want 0", ec)
				}
			}
			if !strings.Contains(answer.Text, "FAKE: tool said") {
				t.Errorf("answer %q", answer.Text)
			}
			seen := map[string]bool{}
			for _, e := range got {
				m := e.msg
				if m.Agent != c.agent || m.NativeID == "" || seen[m.NativeID] {
					t.Errorf("message %s: agent %q, native id %q (dup %v)", m.Kind, m.Agent, m.NativeID, seen[m.NativeID])
				}
				seen[m.NativeID] = true
				if m.Model == "" {
					t.Errorf("message %s has no model", m.Kind)
				}
				if err := m.Validate(); err != nil {
					t.Errorf("invalid message: %v", err)
				}
			}
			// Synced while running: the tool result was out before the
			// held-back answer let the CLI finish.
			if lead := end.Sub(got[1].at); lead < hold/2 {
				t.Errorf("tool result emitted only %s before the turn ended; want it synced while the turn runs", lead)
			}

			// Everything emitted is in the native session under the same
			// NativeID (what a restarted daemon compares against).
			all, err := r.Native(context.Background(), runner.Turn{Agent: c.agent, Home: turn.Home, Cwd: turn.Cwd, Env: turn.Env, NativeID: res.NativeID})
			if err != nil {
				t.Fatalf("Native: %v", err)
			}
			byID := map[string]transcript.Kind{}
			for _, m := range all {
				byID[m.NativeID] = m.Kind
			}
			for _, e := range got {
				if k, ok := byID[e.msg.NativeID]; !ok || k != e.msg.Kind {
					t.Errorf("emitted %s %s is not in the native session (%d messages)", e.msg.Kind, e.msg.NativeID, len(all))
				}
			}
			if len(all) != len(got)+1 || all[0].Kind != transcript.KindUser {
				t.Errorf("native session holds %d messages, want the prompt and the %d emitted", len(all), len(got))
			}

			// Second turn on the returned native session.
			proxy.setDelay(nil)
			turn.NativeID, turn.NativePath = res.NativeID, res.NativePath
			turn.Prompt = "-v looks like a flag, second turn MARKER-TWO"
			res2, got2, _, err := run(t, r, turn)
			if err != nil {
				t.Fatalf("resume turn: %v", err)
			}
			if !res2.PromptSeen {
				t.Errorf("the resumed turn's prompt was not recognised in the native transcript")
			}
			if res2.NativeID != res.NativeID {
				t.Errorf("resume moved to native session %q, want %q", res2.NativeID, res.NativeID)
			}
			if c.agent != "opencode" && res2.NativePath != res.NativePath {
				t.Errorf("resume wrote %q, want %q", res2.NativePath, res.NativePath)
			}
			if k := kinds(got2); !equalKinds(k, []transcript.Kind{transcript.KindAssistant}) {
				t.Fatalf("resume emitted %v, want only the answer (no replay of turn one, no prompt)", k)
			}
			if !strings.Contains(got2[0].msg.Text, "MARKER-TWO") {
				t.Errorf("resume answer %q", got2[0].msg.Text)
			}
			// The resumed turn's NativeID is the one a whole read gives
			// (append-only files are tailed from the turn's start offset).
			all2, err := r.Native(context.Background(), runner.Turn{Agent: c.agent, Home: turn.Home, Cwd: turn.Cwd, Env: turn.Env, NativeID: res2.NativeID, NativePath: res2.NativePath})
			if err != nil {
				t.Fatalf("Native after resume: %v", err)
			}
			if last := all2[len(all2)-1]; last.NativeID != got2[0].msg.NativeID || last.Text != got2[0].msg.Text {
				t.Errorf("resumed answer emitted as %s, the native session ends with %s %q", got2[0].msg.NativeID, last.NativeID, last.Text)
			}
			req := lastTurnText(t, fake)
			for _, w := range []string{"QMARK: please TOOLCALL now", "tool-ran-ok", "FAKE: tool said", "-v looks like a flag", "MARKER-TWO"} {
				if !strings.Contains(req, w) {
					t.Errorf("the resumed turn's model request lacks %q (continuity):\n%s", w, req)
				}
			}

			// Third turn by native id alone: the runner finds the file.
			turn.NativeID, turn.NativePath = res.NativeID, ""
			turn.Prompt = "/tmp/x looks like a command, third turn MARKER-THREE"
			res3, got3, _, err := run(t, r, turn)
			if err != nil {
				t.Fatalf("resume by id: %v", err)
			}
			if !res3.PromptSeen {
				t.Errorf("the prompt of the turn resumed by id was not recognised in the native transcript")
			}
			if res3.NativeID != res.NativeID || res3.NativePath != res2.NativePath {
				t.Errorf("resume by id: native %q %q, want %q %q", res3.NativeID, res3.NativePath, res.NativeID, res2.NativePath)
			}
			if k := kinds(got3); !equalKinds(k, []transcript.Kind{transcript.KindAssistant}) {
				t.Fatalf("resume by id emitted %v, want only the answer", k)
			}
			req = lastTurnText(t, fake)
			for _, w := range []string{"tool-ran-ok", "MARKER-TWO", "/tmp/x looks like a command", "MARKER-THREE"} {
				if !strings.Contains(req, w) {
					t.Errorf("the turn resumed by id lacks %q:\n%s", w, req)
				}
			}
		})
	}
}

func equalKinds(a, b []transcript.Kind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestInterrupt blocks every CLI on a model reply that does not come,
// cancels the turn and checks the whole process group is gone.
func TestInterrupt(t *testing.T) {
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			t.Parallel()
			fake := fakemodel.Start(t)
			proxy := startProxy(t, fake.URL)
			proxy.setDelay(func([]byte) time.Duration { return 90 * time.Second })
			r, turn := setup(t, c, proxy.URL)
			turn.Prompt = "this reply never comes"
			startedPID := 0
			turn.OnStart = func(pid int) { startedPID = pid }
			ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
			defer cancel()
			blocked := make(chan bool, 1)
			cancelled := make(chan time.Time, 1)
			go func() {
				select {
				case <-proxy.seen: // the CLI is waiting on the model
					time.Sleep(300 * time.Millisecond)
					blocked <- true
				case <-time.After(2 * time.Minute):
					blocked <- false
				}
				cancelled <- time.Now()
				cancel()
			}()
			var got []transcript.Message
			start := time.Now()
			res, err := r.Run(ctx, turn, func(m transcript.Message) { got = append(got, m) })
			t.Logf("interrupted after %s: %+v err=%v", time.Since(start).Round(time.Millisecond), res, err)
			if res.Reason != runner.ReasonInterrupted || !errors.Is(err, &runner.Error{Reason: runner.ReasonInterrupted}) {
				t.Fatalf("reason %q err %v, want interrupted", res.Reason, err)
			}
			if took := time.Since(<-cancelled); took > r.Grace+3*time.Second {
				t.Errorf("the turn took %s to stop after the cancel (grace %s)", took, r.Grace)
			} else {
				t.Logf("stopped %s after the cancel", took.Round(time.Millisecond))
			}
			if !<-blocked {
				t.Fatal("the CLI never reached the model; the cancel came from the timeout")
			}
			if n := len(fake.Turns()); n != 0 {
				t.Errorf("%d model turns were answered; the held request must not complete", n)
			}
			if res.PID == 0 || startedPID != res.PID {
				t.Fatalf("pid %d, OnStart saw %d", res.PID, startedPID)
			}
			if err := syscall.Kill(-res.PID, 0); !errors.Is(err, syscall.ESRCH) {
				t.Fatalf("process group %d still has members (kill -0: %v): %v", res.PID, err, groupMembers(res.PID))
			}
			if m := groupMembers(res.PID); len(m) > 0 {
				t.Fatalf("processes left in group %d: %v", res.PID, m)
			}
			for _, m := range got {
				if m.Kind == transcript.KindAssistant {
					t.Errorf("an interrupted turn emitted an answer: %q", m.Text)
				}
			}
		})
	}
}

// groupMembers lists the pids in /proc whose process group is pgid.
func groupMembers(pgid int) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(p, "/proc/"), "/stat")+" "+s[:i+1])
		}
	}
	return out
}

// TestUnauthorized: a model answering 401 fails the turn as "not logged
// in", and nothing is emitted as if it had succeeded.
func TestUnauthorized(t *testing.T) {
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			t.Parallel()
			fake := fakemodel.Start(t)
			fake.FailNext(1000, http.StatusUnauthorized)
			fake.SetHeader("Retry-After", "0") // CLIs that retry do it at once
			r, turn := setup(t, c, fake.URL)
			turn.Env = append(turn.Env, "CLAUDE_CODE_MAX_RETRIES=0")
			turn.Prompt = "hello there"
			res, got, _, err := run(t, r, turn)
			if err == nil || res.Reason != runner.ReasonNotLoggedIn || !errors.Is(err, &runner.Error{Reason: runner.ReasonNotLoggedIn}) {
				t.Fatalf("reason %q err %v, want %q", res.Reason, err, runner.ReasonNotLoggedIn)
			}
			if len(got) != 0 {
				t.Fatalf("a failed turn emitted %v", kinds(got))
			}
			if len(fake.Turns()) == 0 {
				t.Fatal("the CLI never reached the model")
			}
		})
	}
}

// TestMissingBinary: a CLI that is not there fails with "binary not found"
// before anything runs.
func TestMissingBinary(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	cwd := t.TempDir()
	t.Run("configured path", func(t *testing.T) {
		r := &runner.Runner{Bins: map[string]string{"claude": filepath.Join(t.TempDir(), "no-such-claude")}}
		res, err := r.Run(context.Background(), runner.Turn{Agent: "claude", Home: home, Cwd: cwd, Prompt: "hi"}, func(transcript.Message) { t.Error("emitted") })
		if res.Reason != runner.ReasonBinaryNotFound || !errors.Is(err, &runner.Error{Reason: runner.ReasonBinaryNotFound}) || res.PID != 0 {
			t.Fatalf("got %+v %v", res, err)
		}
	})
	t.Run("not on PATH", func(t *testing.T) {
		r := &runner.Runner{}
		empty := t.TempDir()
		res, err := r.Run(context.Background(), runner.Turn{Agent: "codex", Home: home, Cwd: cwd, Prompt: "hi", Env: []string{"PATH=" + empty}}, func(transcript.Message) { t.Error("emitted") })
		if res.Reason != runner.ReasonBinaryNotFound || err == nil || !strings.Contains(err.Error(), "codex") {
			t.Fatalf("got %+v %v", res, err)
		}
	})
}

// TestNoCredentials: a CLI with no key at all (never logged in) fails as
// "not logged in" without a model turn succeeding.
func TestNoCredentials(t *testing.T) {
	for _, tc := range []struct {
		c   agentCase
		key string
	}{
		{cases[0], "ANTHROPIC_API_KEY"},
		{cases[1], "FAKE_API_KEY"},
		{cases[2], "GEMINI_API_KEY"},
	} {
		t.Run(tc.c.agent, func(t *testing.T) {
			t.Parallel()
			fake := fakemodel.Start(t)
			r, turn := setup(t, tc.c, fake.URL)
			var env []string
			for _, kv := range turn.Env {
				if !strings.HasPrefix(kv, tc.key+"=") {
					env = append(env, kv)
				}
			}
			turn.Env = append(env, "CLAUDE_CODE_MAX_RETRIES=0")
			turn.Prompt = "hello there"
			res, got, _, err := run(t, r, turn)
			if res.Reason != runner.ReasonNotLoggedIn || !errors.Is(err, &runner.Error{Reason: runner.ReasonNotLoggedIn}) {
				t.Fatalf("reason %q err %v, want %q", res.Reason, err, runner.ReasonNotLoggedIn)
			}
			if len(got) != 0 {
				t.Fatalf("a failed turn emitted %v", kinds(got))
			}
		})
	}
}

// TestSlowTool: a tool that takes seconds; where the native transcript
// records the call before the tool finishes, the call is emitted while the
// tool still runs. By default it runs the agents that do (callFirst), for
// which that is the point; for Gemini and OpenCode it would prove only a
// tool call and its result, which TestTurns' first turn proves for every
// agent (with CAST_MATRIX=full they run here too: agenttest.MatrixEnv).
func TestSlowTool(t *testing.T) {
	for _, c := range cases {
		if !c.callFirst && !agenttest.FullMatrix() {
			continue
		}
		t.Run(c.agent, func(t *testing.T) {
			t.Parallel()
			fake := fakemodel.Start(t)
			r, turn := setup(t, c, fake.URL)
			turn.Prompt = "please TOOLCALL now CMD[sleep 3; echo slow-done]"
			_, got, _, err := run(t, r, turn)
			if err != nil {
				t.Fatal(err)
			}
			if k := kinds(got); !equalKinds(k, []transcript.Kind{transcript.KindToolCall, transcript.KindToolResult, transcript.KindAssistant}) {
				t.Fatalf("emitted %v", k)
			}
			lead := got[1].at.Sub(got[0].at)
			t.Logf("%s: call emitted %s before its result", c.agent, lead)
			if c.callFirst && lead < 1500*time.Millisecond {
				t.Errorf("the call was emitted only %s before the result of a 3 s tool", lead)
			}
			if !strings.Contains(got[1].msg.ToolResult.Output, "slow-done") {
				t.Errorf("result %q", got[1].msg.ToolResult.Output)
			}
		})
	}
}

// TestStragglerHoldsStdout: a process that leaves the CLI's process group
// but keeps its stdout open must not keep the turn from ending.
func TestStragglerHoldsStdout(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "claude")
	// The straggler is bounded (8 s) and in its own session, so the group
	// kill does not reach it.
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsetsid -f sleep 8\necho started\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &runner.Runner{Bins: map[string]string{"claude": script}, Logf: func(f string, a ...any) { t.Logf(time.Now().Format("05.000 ")+f, a...) }}
	start := time.Now()
	res, err := r.Run(context.Background(), runner.Turn{Agent: "claude", Home: t.TempDir(), Cwd: t.TempDir(), Prompt: "hi"}, func(transcript.Message) {})
	took := time.Since(start)
	t.Logf("%+v %v in %s", res, err, took)
	if took > 7*time.Second {
		t.Fatalf("the turn took %s: it waited for the straggler", took)
	}
	if res.ExitCode != 3 || res.Reason != runner.ReasonFailed || err == nil {
		t.Fatalf("got %+v %v", res, err)
	}
}

// TestUnknownSession: resuming a native session that is not there fails
// as "session not found" with nothing emitted.
func TestUnknownSession(t *testing.T) {
	ids := map[string]string{
		"claude": "0c9b8c2e-5b9a-4c55-8f3e-3f4b1d2a6e71", "codex": "01a22a97-1722-7810-a4f8-915092ab0000",
		"gemini": "0c9b8c2e-5b9a-4c55-8f3e-3f4b1d2a6e72", "pi": "01a22a97-1722-7810-a4f8-915092ab0001",
		"opencode": "ses_dd568507efferfRoarZinpkmRn",
	}
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			t.Parallel()
			fake := fakemodel.Start(t)
			r, turn := setup(t, c, fake.URL)
			turn.NativeID = ids[c.agent]
			turn.Prompt = "hello again"
			res, got, _, err := run(t, r, turn)
			if res.Reason != runner.ReasonNoSession || !errors.Is(err, &runner.Error{Reason: runner.ReasonNoSession}) {
				t.Fatalf("reason %q err %v, want %q", res.Reason, err, runner.ReasonNoSession)
			}
			if len(got) != 0 {
				t.Fatalf("emitted %v", kinds(got))
			}
		})
	}
}

// TestKilledFromOutside: a CLI ended by a signal that stops a process from
// outside (the OOM killer's SIGKILL, a user's SIGTERM) fails as "killed",
// which the node holds for the next message; so does one that catches the
// signal and exits 128+n (Claude Code exits 143 on SIGTERM, which read as
// a refusal and dropped the message), or with the status its driver says
// it exits with when stopped (TestStopSignalMidTurn runs the real CLIs). A
// crash (SIGSEGV) is the CLI's own failure, which the prompt may cause.
func TestKilledFromOutside(t *testing.T) {
	for _, tc := range []struct {
		name, script, want string
		exit               int
	}{
		{"KILL", "kill -KILL $$", runner.ReasonKilled, -1},
		{"TERM", "kill -TERM $$", runner.ReasonKilled, -1},
		{"TERM caught", "trap 'exit 143' TERM; kill -TERM $$", runner.ReasonKilled, 143},
		{"INT caught", "trap 'exit 130' INT; kill -INT $$", runner.ReasonKilled, 130},
		{"SEGV", "kill -SEGV $$", runner.ReasonFailed, -1},
		{"SEGV caught", "trap 'exit 139' SEGV; kill -SEGV $$", runner.ReasonFailed, 139},
		// Claude Code exits 0 on SIGINT with nothing printed (its driver's
		// StoppedExit); a turn that printed an answer or a refusal is not
		// one.
		{"INT caught, exit 0", "exit 0", runner.ReasonKilled, 0},
		{"exit 0 with an answer", "echo the answer", runner.ReasonFailed, 0},
		{"exit 0 with a refusal", "echo 'the model refused to answer' >&2", runner.ReasonRefused, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := filepath.Join(t.TempDir(), "claude")
			if err := os.WriteFile(script, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			r := &runner.Runner{Bins: map[string]string{"claude": script}}
			res, err := r.Run(context.Background(), runner.Turn{Agent: "claude", Home: t.TempDir(), Cwd: t.TempDir(), Prompt: "hi"}, func(transcript.Message) {})
			if res.Reason != tc.want || !errors.Is(err, &runner.Error{Reason: tc.want}) || res.ExitCode != tc.exit {
				t.Fatalf("%s: reason %q exit %d err %v, want %q exit %d", tc.name, res.Reason, res.ExitCode, err, tc.want, tc.exit)
			}
		})
	}
}
