// Package runner runs one turn of a real agent CLI on a node: the agent's
// headless process in its own process group, with HOME set to Turn.Home
// (the user's own, or an isolated folder under the node's data dir that
// also holds the agent's config dirs), in the session's working
// directory. While the turn runs it syncs the agent's new native entries
// into neutral messages. It knows nothing of gRPC or etcd: the node daemon
// calls Run and stores what it emits.
//
// How new entries are found: for claude, codex, gemini and pi the native
// transcript file is read with the agent's own parser whenever its size or
// mtime changes (checked every Runner.Poll), and the messages past the ones
// already accounted for are emitted. Claude, codex and pi only append
// during a turn, so only the bytes after the turn's start offset are parsed
// (complete lines only; codex's position-based NativeIDs are shifted to the
// whole file's numbering); gemini upserts and rewrites records, so its file
// is read whole (throttled to 4x the cost of the last read). Accounting is positional with a
// content check: the messages the file held before the turn (a resumed
// session) and every message emitted are remembered as fingerprints (kind,
// text, tool call id/name/input, tool result call id/output); a re-read
// whose prefix still matches emits only what follows, so re-reading a file
// never emits twice. When a CLI rewrites the history it replays (gemini's
// $set.messages), the prefix is realigned by matching fingerprints. An
// assistant or thinking text that is the last entry while the process still
// runs is held back until something follows it or the process ends, so a
// streamed answer is never emitted half-written. OpenCode keeps its store
// in SQLite, so its turn runs with `--format json` and the parts it streams
// (complete text parts, completed tool parts) are mapped with OpenCode's
// own Reader.
//
// How the prompt is recognised: the CLI records the prompt it was given as
// the first user message of the turn. The first new user message that comes
// before any other new message of the turn (but a compaction summary, which
// a CLI compacting as the turn begins writes first, and, in a session the CLI
// rewrote, an entry it put before the prompt's own record) and whose text, trimmed (and
// without the double quotes OpenCode puts around a prompt with spaces),
// equals or contains the prompt is skipped; Result.PromptSeen says it was
// found. So is a user message of the same text the CLI writes again later
// in the turn (after a tool call, or rewriting its session), until a user
// message of other text begins another turn. Every other message is emitted once, with Agent, Model (the one
// the transcript names, else Turn.Model) and NativeID set.
package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/transcript"
)

// Failure reasons (Result.Reason, Error.Reason).
const (
	ReasonBinaryNotFound = "binary not found"
	ReasonNotLoggedIn    = "not logged in"     // 401/403 or an invalid/missing key
	ReasonRefused        = "refused"           // the model or the CLI refused the prompt
	ReasonRateLimited    = "rate limited"      // 429 or a usage limit
	ReasonInterrupted    = "interrupted"       // ctx was cancelled
	ReasonNoSession      = "session not found" // the native session to resume is gone
	ReasonUnsupported    = "unsupported"       // the agent cannot run this turn (no CLI form)
	ReasonKilled         = "killed"            // a signal from outside ended the CLI (the OOM killer, a user's kill)
	ReasonFailed         = "failed"            // anything else: see Error.Detail
)

// Turn is one prompt to run.
type Turn struct {
	Agent  string // registry name ("claude", "codex", ...)
	Model  string // optional; the agent's --model value (pi and opencode: provider/model)
	Effort string // optional; ignored for agents without an effort flag
	Cwd    string // absolute working directory of the session
	// Home is the turn's HOME. For an isolated turn (UserEnv nil) it is a
	// folder under the node's data dir that also holds the XDG dirs, TMPDIR
	// and the agent's config dir (NativeHome).
	Home string
	// UserEnv, when not nil, runs the user's own agent: the CLI gets this
	// environment with HOME=Home and nothing moved, so it finds the user's
	// login, settings, MCP servers and session folders where it always does.
	UserEnv []string
	// NativeID and NativePath name the native session to resume; both
	// empty start a fresh one. Either is enough for every agent (the other
	// is found under Home); opencode needs NativeID.
	NativeID, NativePath string
	// ForkOf (and optionally ForkPath) name an existing native session the
	// turn forks with the CLI's own fork command (claude --fork-session,
	// codex exec fork) instead of resuming NativeID: the history is the
	// CLI's copy of that session, which stays unchanged, and Result names
	// the new session. Only agents whose Commands.RunnerFork is set support it.
	ForkOf, ForkPath string
	Prompt           string
	// Env is extra environment (provider base URLs, keys, ...), applied
	// last so it overrides the defaults.
	Env []string
	// Args are extra CLI arguments appended to the command, e.g. the
	// agent's approval settings (claude "--allowedTools Bash", gemini
	// "--yolo").
	Args []string
	// Ephemeral runs a turn that is to leave no session (a readiness
	// probe): a CLI that can keep none gets its own option for it
	// (agents.Ephemeral), and a turn without a native session is not a
	// failure.
	Ephemeral bool
	// ReportUsage asks for the provider's usage windows in Result.Usage
	// (Claude then runs with --output-format stream-json, the only output
	// carrying its rate_limit_event; Codex always records them).
	ReportUsage bool
	// OnStart, when set, is called once the CLI runs, with its process
	// (and process group) id: the CLI outlives a crashed daemon, so a
	// daemon that records it can find the group again.
	OnStart func(pid int)
}

// Result is how a turn ended.
type Result struct {
	NativeID   string // the native session to resume next time
	NativePath string // its transcript file (opencode: its SQLite store)
	ExitCode   int    // the CLI's exit status; -1 when it was killed or never started
	Reason     string // empty on success, else one of the Reason* values
	PID        int    // the process (and process group) id, 0 when not started
	// PromptSeen: the prompt was found in the native transcript (and not
	// emitted). After an interrupt it says whether the native session
	// holds the prompt, so resuming it replays the prompt as history.
	PromptSeen bool
	// NativeUnread: after an interrupt the native session could not be
	// read, so whether it holds the prompt is not known.
	NativeUnread bool
	// NativeLost: the CLI left its transcript without history it held
	// when the turn began; the next turn must rebuild it, or the agent
	// answers without the conversation.
	NativeLost bool
	Emitted    int    // messages passed to emit
	Stderr     string // the CLI's last stderr (bounded), for logs
	// Usage is the provider's usage windows as the agent recorded them
	// this turn (Codex and Claude, with Turn.ReportUsage; nil when unknown).
	Usage []quota.Window
}

// Error is the error Run returns for a failed turn.
type Error struct {
	Reason   string
	ExitCode int
	Detail   string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return "runner: " + e.Reason
	}
	return "runner: " + e.Reason + ": " + e.Detail
}

// Is matches another *Error with the same Reason, so callers can write
// errors.Is(err, &runner.Error{Reason: runner.ReasonInterrupted}).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason
}

// Runner runs turns. The zero value is usable.
type Runner struct {
	// Bins maps an agent name to its CLI's absolute path. An agent not in
	// it is looked up by its Binary name in the turn's PATH (Turn.Env's
	// PATH, else the node's).
	Bins map[string]string
	// Grace is how long an interrupted turn gets between SIGTERM and
	// SIGKILL (default 5s).
	Grace time.Duration
	// Poll is how often the native transcript is checked (default 200ms).
	Poll time.Duration
	// Logf, when set, receives diagnostics.
	Logf func(format string, args ...any)
}

func (r *Runner) grace() time.Duration {
	if r.Grace > 0 {
		return r.Grace
	}
	return 5 * time.Second
}

func (r *Runner) poll() time.Duration {
	if r.Poll > 0 {
		return r.Poll
	}
	return 200 * time.Millisecond
}

func (r *Runner) logf(format string, args ...any) {
	if r.Logf != nil {
		r.Logf(format, args...)
	}
}

// fail builds a failed Result and its error.
func fail(res Result, reason, detail string) (Result, error) {
	res.Reason = reason
	return res, &Error{Reason: reason, ExitCode: res.ExitCode, Detail: detail}
}

// Run runs one turn and returns when the CLI has exited and its process
// group is gone. emit is called from one goroutine at a time, in order.
// Cancelling ctx interrupts the turn: SIGTERM to the whole process group,
// SIGKILL after Grace, Reason "interrupted". A failed turn returns a
// non-nil *Error whose Reason is also in Result.Reason. Its phases are in
// process.go.
func (r *Runner) Run(ctx context.Context, t Turn, emit func(transcript.Message)) (Result, error) {
	res := Result{NativeID: t.NativeID, NativePath: t.NativePath, ExitCode: -1}
	p, err := r.prepare(ctx, t)
	if err != nil {
		return failed(res, err)
	}
	release, err := p.exclusive(ctx)
	if err != nil {
		return failed(res, err)
	}
	defer release()
	pr, err := r.start(p)
	if err != nil {
		return failed(res, err)
	}
	res.PID = pr.pgid
	if t.OnStart != nil {
		t.OnStart(pr.pgid)
	}
	out := p.emitter(&res, emit)
	o := p.read(pr, out)
	interrupted, waitErr := r.watch(ctx, p, pr, out)
	r.reap(p, pr, o)
	return r.finish(p, &res, waitErr, interrupted, o, out)
}

// failed is res failed with err, an *Error from a phase.
func failed(res Result, err error) (Result, error) {
	e := asError(err, ReasonFailed)
	return fail(res, e.Reason, e.Detail)
}

// lookBin finds the agent's CLI.
// CLI is the agent's CLI and environment for t, as a turn of t runs it
// (for a node that runs the CLI outside a turn: OpenCode's store listing).
func (r *Runner) CLI(t Turn) (bin string, env []string, err error) {
	a, ok := agents.Lookup(t.Agent)
	if !ok {
		return "", nil, fmt.Errorf("unknown agent %q", t.Agent)
	}
	env = buildEnv(a, t)
	bin, err = r.lookBin(a, env)
	return bin, env, err
}

func (r *Runner) lookBin(a agents.Agent, env []string) (string, error) {
	if p, ok := r.Bins[a.Name]; ok && p != "" {
		if !fsutil.Executable(p) {
			return "", fmt.Errorf("%s CLI not found at %s", a.Name, p)
		}
		return p, nil
	}
	if a.Binary == "" {
		return "", fmt.Errorf("%s has no CLI", a.Name)
	}
	path := EnvValue(env, "PATH")
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, a.Binary)
		if fsutil.Executable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s (%s) is not on PATH", a.Binary, a.Name)
}

// waitGroupGone polls until no process of the group is left (or d passes).
func waitGroupGone(pgid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Native reads the whole native session t names (NativeID and/or
// NativePath under t.Home) as neutral messages, Agent set, NativeID as the
// live sync emits it: a daemon that restarted mid-turn compares it with the
// neutral copy by NativeID to emit what it missed. OpenCode's session is
// read with `opencode export`. Gemini re-expresses its history when it
// resumes, so messages from before the latest gemini resume may carry new
// NativeIDs: compare those by content.
func (r *Runner) Native(ctx context.Context, t Turn) ([]transcript.Message, error) {
	a, ok := agents.Lookup(t.Agent)
	if !ok {
		return nil, &Error{Reason: ReasonUnsupported, Detail: fmt.Sprintf("unknown agent %q", t.Agent)}
	}
	if t.NativeID == "" && t.NativePath == "" {
		return nil, &Error{Reason: ReasonNoSession, Detail: "no native id or path"}
	}
	d, err := newDriver(a, t, r.logf)
	if err != nil {
		return nil, err
	}
	var msgs []transcript.Message
	if d.store != nil {
		env := buildEnv(a, t)
		bin, err := r.lookBin(a, env)
		if err != nil {
			return nil, &Error{Reason: ReasonBinaryNotFound, Detail: err.Error()}
		}
		if msgs, err = d.store.Export(ctx, bin, env, agents.Target{Home: d.home, Cwd: t.Cwd}, d.id); err != nil {
			return nil, err
		}
	} else {
		d.locate()
		if d.path == "" {
			return nil, &Error{Reason: ReasonNoSession, Detail: fmt.Sprintf("no %s session %s under %s", a.Name, d.id, d.home)}
		}
		if msgs, err = d.tail.reader.Read(d.path); err != nil {
			return nil, err
		}
	}
	for i := range msgs {
		msgs[i].Agent = a.Name
	}
	return msgs, nil
}
