package agents

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ForkCut says where an agent's own fork can cut a conversation.
type ForkCut int

const (
	ForkNone          ForkCut = iota // no native fork
	ForkAtEnd                        // copies the whole session (fork at the latest message)
	ForkAtUserMessage                // can fork before any user message
	ForkAtAnyMessage                 // can fork after any message
)

var forkCutNames = [...]string{"none", "end", "user_message", "any_message"}

func (c ForkCut) String() string {
	if c < 0 || int(c) >= len(forkCutNames) {
		return fmt.Sprintf("forkcut(%d)", int(c))
	}
	return forkCutNames[c]
}

// Capabilities are what cast may do with an agent.
type Capabilities struct {
	// CanReconstitute: cast can write a native transcript the CLI resumes,
	// so a session can move into this agent with its whole history. Agents
	// without it get a fresh session seeded with a slice (and cannot take
	// over an existing session's history at all, see CheckTakeover).
	CanReconstitute bool
	// NativeFork is where the agent's own fork command can cut. Agents that
	// can reconstitute can always be forked anywhere by cast writing a cut
	// transcript; this is only about the CLI's own command.
	NativeFork ForkCut
	// ModelChange: the model can change between turns of one session.
	ModelChange bool
	// EffortLevels are the accepted reasoning-effort values (nil: none).
	EffortLevels []string
	// ForkReadsSource: a native fork keeps reading the source's native
	// file instead of copying it. Codex's `codex exec fork` (0.171.0)
	// writes a rollout that holds only the fork's own entries and reads the
	// history from the source's rollout (forked_from_id + an ordinal), so a
	// fork stays right only while the source's rollout is never rewritten:
	// the node appends to it on a resume (the ordinal cuts those entries
	// off) and writes every rebuild under a new native id, leaving the old
	// rollout to the forks that read it. Claude's --fork-session and
	// OpenCode's --fork (1.18.33) copy the history, so their forks stand
	// alone.
	ForkReadsSource bool
	// AccountSwitch: a session can continue on another account of the
	// agent's fleet, so a limit may switch accounts.
	AccountSwitch bool
	// NativeAccountBound: the native session holds what only the account
	// that wrote it can send back (Codex's rollouts carry the provider's
	// encrypted reasoning items, refused under another account). A session
	// that continues on another fleet account is rebuilt from the neutral
	// copy first, whose writer leaves such items out (reasoning summaries
	// stay as text the CLI shows, not sent to the model).
	NativeAccountBound bool
	// IndexedIDs: the CLI finds a session by id through an index of its
	// own that remembers the session's file (Codex 0.171.0's state db), so
	// a session written back under its old id after its file was deleted
	// is not found (a new file name, the index still naming the old one).
	// `cast restore` writes such an agent's session under a new id.
	IndexedIDs bool
}

// Commands are argument templates (never a shell line). Placeholders are
// whole or part of an argument: {prompt}, {id} (native session id), {path}
// (native transcript file), {model}, {effort}. Nil means unsupported.
type Commands struct {
	Headless []string // fresh headless turn
	Resume   []string // headless turn in an existing native session
	Fork     []string // headless turn in a native fork of a session
	Model    []string // appended to choose the model
	Effort   []string // appended to choose the reasoning effort
	// PromptStdin: the CLI reads the prompt from its stdin, which the runner
	// writes and closes; the templates then have no {prompt}. A prompt in
	// argv is capped by Linux at 128 KiB per string and is readable by every
	// local user in ps, so every agent whose CLI can do it reads stdin.
	PromptStdin bool
	// MaxPromptBytes is the most the CLI reads of a prompt (0: no known
	// limit); the runner refuses a longer one rather than let the CLI cut
	// it silently.
	MaxPromptBytes int
	// MaxPromptChars is the most characters (Unicode code points) the CLI
	// takes in one turn (0: no known limit). The runner refuses a longer
	// prompt before the CLI starts, with a message naming the limit,
	// unless the agent's driver delivers it another way (Codex: as
	// history, through its app-server).
	MaxPromptChars int
	// Usage is appended when the turn reports the provider's usage
	// windows and the CLI prints them only on request.
	Usage []string
	// RunnerFork: the runner drives Fork headless (the CLI names the new
	// session where the runner finds it).
	RunnerFork bool
	// Env is set for every headless run (after cast's own quiet settings):
	// what keeps the CLI non-interactive, local and without self-update.
	Env []string
	// FailedOnStderr, printed on stderr by a turn with no output, means
	// the turn failed although the CLI exited 0.
	FailedOnStderr string
}

// Agent describes one coding agent cast can run.
type Agent struct {
	Name        string // registry key, as in the API and CLI ("claude")
	DisplayName string // for people ("Claude Code")
	Binary      string // the CLI's executable name
	NPMPackage  string // where the pinned CLI comes from ("" if not on npm)
	Commands    Commands
	// HomeEnv names the environment variable that moves the agent's own
	// folder (agents.Target.Home); DefaultHome is that folder relative to
	// $HOME when the variable is unset.
	HomeEnv     string
	DefaultHome string
	// AltHomeEnv is another variable the CLI reads its folder from (cast
	// moves HOME instead; see gemini).
	AltHomeEnv string
	// Transcript is where the native transcript lives, relative to the
	// agent's own folder, as a pattern for people and docs.
	Transcript string
	// ContextWindow is the default model's window in tokens, used to budget
	// rebuilt transcripts and slices.
	ContextWindow int
	// MintsNativeID: the agent's native ids are not UUIDs (OpenCode's
	// ses_...); given no id, its writer mints a new, time-ordered one.
	MintsNativeID bool
	Caps          Capabilities
	// Verified is false for agents whose CLI is not installable here: their
	// command forms and paths come from third-party code and docs only.
	Verified bool
}

var registry = map[string]Agent{
	"claude": {
		Name: "claude", DisplayName: "Claude Code", Binary: "claude", NPMPackage: "@anthropic-ai/claude-code",
		Commands: Commands{
			// `claude -p` with no prompt argument reads the prompt from
			// stdin (2.1.197: a 2 MB prompt arrives whole).
			Headless: []string{"-p", "--session-id", "{id}"},
			Resume:   []string{"-p", "--resume", "{id}"},
			// The fork gets its new id up front ({new}), so the runner
			// knows which file is the fork's.
			Fork:        []string{"-p", "--resume", "{id}", "--fork-session", "--session-id", "{new}"},
			Model:       []string{"--model", "{model}"},
			Effort:      []string{"--effort", "{effort}"},
			PromptStdin: true,
			// Its usage windows appear only as stream-json events; messages
			// still come from the transcript file.
			Usage:      []string{"--output-format", "stream-json", "--verbose"},
			RunnerFork: true,
			Env:        []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
		},
		HomeEnv: "CLAUDE_CONFIG_DIR", DefaultHome: ".claude",
		Transcript:    "projects/<slug(cwd)>/<session-id>.jsonl",
		ContextWindow: 200_000,
		Caps: Capabilities{CanReconstitute: true, NativeFork: ForkAtEnd, ModelChange: true,
			EffortLevels: []string{"low", "medium", "high", "xhigh", "max"}, AccountSwitch: true},
		Verified: true,
	},
	"codex": {
		Name: "codex", DisplayName: "Codex", Binary: "codex", NPMPackage: "@openai/codex",
		Commands: Commands{
			// Codex mints the id of a fresh thread (thread.started event).
			// A prompt of "-" is read from stdin.
			Headless:    []string{"exec", "--skip-git-repo-check", "--json", "-"},
			Resume:      []string{"exec", "--skip-git-repo-check", "--json", "resume", "{id}", "-"},
			Fork:        []string{"exec", "--skip-git-repo-check", "--json", "fork", "{id}", "-"},
			Model:       []string{"--model", "{model}"},
			Effort:      []string{"-c", "model_reasoning_effort={effort}"},
			PromptStdin: true,
			// Codex 0.171 refuses a turn whose text inputs add up to more
			// than 1,048,576 characters (code points, not bytes; turn/start
			// "Input exceeds the maximum length", input_too_large), in
			// `codex exec` and app-server alike: splitting the text into
			// several input items does not help, and exec has no other way
			// in. Only thread/inject_items takes more (as history, outside a
			// turn): the runner's Codex driver adds a longer prompt there
			// first and runs a short turn that points at it
			// (codex.DeliverLarge).
			MaxPromptChars: 1 << 20,
			RunnerFork:     true,
		},
		HomeEnv: "CODEX_HOME", DefaultHome: ".codex",
		Transcript:    "sessions/YYYY/MM/DD/rollout-<timestamp>-<session-id>.jsonl",
		ContextWindow: 272_000,
		Caps: Capabilities{CanReconstitute: true, NativeFork: ForkAtEnd, ModelChange: true,
			EffortLevels: []string{"minimal", "low", "medium", "high", "xhigh"}, ForkReadsSource: true,
			AccountSwitch: true, NativeAccountBound: true, IndexedIDs: true},
		Verified: true,
	},
	"gemini": {
		Name: "gemini", DisplayName: "Gemini CLI", Binary: "gemini", NPMPackage: "@google/gemini-cli",
		Commands: Commands{
			// Without -p and with stdin not a terminal, gemini runs headless
			// on what stdin holds (0.61: up to 8 MiB; a -p text would be
			// appended to it). It waits 500 ms for the first byte, so the
			// runner writes the prompt as the CLI starts.
			Headless: []string{"--session-id", "{id}"},
			// --resume (run in the session's cwd) appends to the session's
			// file; --session-file would copy the file into a new session
			// on every turn.
			Resume:         []string{"--resume", "{id}"},
			Model:          []string{"--model", "{model}"},
			PromptStdin:    true,
			MaxPromptBytes: 8 << 20, // beyond it gemini truncates with only a debug warning
			// Headless gemini refuses an untrusted folder (rc 55) and would
			// re-spawn node with a bigger heap outside cast's control.
			Env: []string{"GEMINI_CLI_TRUST_WORKSPACE=true", "GEMINI_CLI_NO_RELAUNCH=true"},
		},
		// Gemini finds its folder as $HOME/.gemini; the bundle also reads
		// GEMINI_CLI_HOME, whose exact meaning is unverified, so cast moves
		// HOME instead.
		DefaultHome:   ".gemini",
		AltHomeEnv:    "GEMINI_CLI_HOME",
		Transcript:    "tmp/<slug(basename cwd)>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl",
		ContextWindow: 1_048_576,
		Caps:          Capabilities{CanReconstitute: true, NativeFork: ForkNone, ModelChange: true},
		Verified:      true,
	},
	"pi": {
		Name: "pi", DisplayName: "pi", Binary: "pi", NPMPackage: "@mariozechner/pi-coding-agent",
		Commands: Commands{
			// `pi -p` puts piped stdin (trimmed) before any message argument.
			Headless:    []string{"-p"},
			Resume:      []string{"--session", "{path}", "-p"},
			Fork:        []string{"--fork", "{path}", "-p"},
			Model:       []string{"--model", "{model}"},
			Effort:      []string{"--thinking", "{effort}"},
			PromptStdin: true,
			Env:         []string{"PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0"},
		},
		HomeEnv: "PI_CODING_AGENT_DIR", DefaultHome: ".pi/agent",
		Transcript:    "sessions/--<cwd with / replaced by ->--/<timestamp>_<session-id>.jsonl",
		ContextWindow: 128_000, // pi runs many providers; the smallest common window
		Caps: Capabilities{CanReconstitute: true, NativeFork: ForkAtEnd, ModelChange: true,
			EffortLevels: []string{"off", "minimal", "low", "medium", "high", "xhigh"}},
		Verified: true,
	},
	"opencode": {
		Name: "opencode", DisplayName: "OpenCode", Binary: "opencode", NPMPackage: "opencode-ai",
		Commands: Commands{
			// `opencode run` with no message argument reads the message from
			// stdin (1.18.33: as given; an argument holding spaces would be
			// wrapped in double quotes). Parts stream as JSON events on
			// stdout, errors go to stderr.
			Headless:    []string{"run", "--format", "json", "--print-logs", "--log-level", "ERROR"},
			Resume:      []string{"run", "--format", "json", "--print-logs", "--log-level", "ERROR", "--session", "{id}"},
			Fork:        []string{"run", "--format", "json", "--print-logs", "--log-level", "ERROR", "--session", "{id}", "--fork"},
			Model:       []string{"--model", "{model}"},
			Effort:      []string{"--variant", "{effort}"},
			PromptStdin: true,
			RunnerFork:  true,
			Env:         []string{"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1"},
			// opencode run exits 0 after giving up on a failing provider.
			FailedOnStderr: "level=ERROR",
		},
		HomeEnv: "XDG_DATA_HOME", DefaultHome: ".local/share",
		// Not a file: rows in SQLite, loaded through `opencode import`.
		Transcript:    "opencode/opencode.db (session, message, part tables)",
		ContextWindow: 128_000,
		MintsNativeID: true,
		// The CLI's --fork copies the whole session; the serve API
		// (POST /session/:id/fork {messageID}) cuts after any message.
		Caps: Capabilities{CanReconstitute: true, NativeFork: ForkAtAnyMessage, ModelChange: true,
			EffortLevels: []string{"minimal", "low", "medium", "high", "max"}},
		Verified: true,
	},
	"grok": {
		// xAI's Grok Build CLI (not the npm @vibe-kit/grok-cli, which keeps
		// no transcript). It is not distributed through npm, so nothing here
		// is run in tests; the layout comes from third-party readers.
		Name: "grok", DisplayName: "Grok Build", Binary: "grok",
		Commands: Commands{
			Headless: []string{"-p", "{prompt}"},
		},
		HomeEnv: "GROK_HOME", DefaultHome: ".grok",
		Transcript:    "sessions/<url-encoded cwd>/<session-id>/chat_history.jsonl (+ summary.json, updates.jsonl)",
		ContextWindow: 256_000,
		Caps:          Capabilities{CanReconstitute: true, NativeFork: ForkNone},
	},
	"cursor": {
		Name: "cursor", DisplayName: "Cursor", Binary: "cursor-agent",
		Commands: Commands{
			Headless: []string{"-p", "{prompt}", "--output-format", "stream-json"},
			Resume:   []string{"--resume", "{id}", "-p", "{prompt}", "--output-format", "stream-json"},
			Model:    []string{"--model", "{model}"},
		},
		DefaultHome: ".cursor",
		// SQLite blobs cast cannot write, hence no reconstitution.
		Transcript:    "chats/<hash(cwd)>/<session-id>/store.db",
		ContextWindow: 200_000,
		Caps:          Capabilities{CanReconstitute: false, NativeFork: ForkNone, ModelChange: true},
	},
	"muse": {
		// Meta's Muse coding agent; its session records are append-only
		// runtime events (encrypted reasoning included) that cast can read
		// but not author.
		//
		// The command forms come from third-party launchers that measured
		// Muse Code 0.1.0 (its docs are behind a login): `muse exec --json`
		// is the headless lane, the prompt is the last positional argument,
		// a turn continues a session by passing the same --session-id again
		// (there is no --resume on exec), and the effort menu is the CLI's
		// own refusal text. Not run here: the CLI is not installable.
		Name: "muse", DisplayName: "Muse", Binary: "muse",
		Commands: Commands{
			Headless: []string{"exec", "--json", "{prompt}"},
			Resume:   []string{"exec", "--json", "--session-id", "{id}", "{prompt}"},
			Model:    []string{"--model", "{model}"},
			Effort:   []string{"--reasoning-effort", "{effort}"},
		},
		DefaultHome:   ".muse",
		Transcript:    "session record JSONL (runtime.session events)",
		ContextWindow: 128_000,
		Caps: Capabilities{CanReconstitute: false, NativeFork: ForkNone, ModelChange: true,
			EffortLevels: []string{"minimal", "low", "medium", "high", "xhigh", "ultra"}},
	},
}

// Lookup returns the agent registered under name.
func Lookup(name string) (Agent, bool) {
	a, ok := registry[name]
	return a, ok
}

// HomeVars are the variables that point some agent at its own folder
// (HomeEnv, AltHomeEnv), sorted: what a process that must not see a
// user's agents drops, and what an account brings its own of.
func HomeVars() []string {
	var out []string
	for _, a := range registry {
		for _, v := range []string{a.HomeEnv, a.AltHomeEnv} {
			if v != "" && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Names lists the registered agents, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ErrNoTakeover is matched (errors.Is) by CheckTakeover's refusal.
var ErrNoTakeover = errors.New("agent cannot take over an existing session's history")

// TakeoverError is CheckTakeover's refusal; its message is shown to users
// verbatim.
type TakeoverError struct{ Agent Agent }

func (e *TakeoverError) Error() string {
	n := e.Agent.DisplayName
	return n + " cannot take over an existing session's history; start a new " + n + " session instead"
}

func (e *TakeoverError) Is(target error) bool { return target == ErrNoTakeover }

// CheckTakeover says whether a session may switch or fork into target. An
// agent that cannot reconstitute a transcript (Cursor, Muse) would start
// without the history, so it is refused up front once the session has
// messages; a blank session can become any agent.
func CheckTakeover(target string, sessionHasMessages bool) error {
	a, ok := Lookup(target)
	if !ok {
		return fmt.Errorf("unknown agent %q (known: %s)", target, strings.Join(Names(), ", "))
	}
	if sessionHasMessages && !a.Caps.CanReconstitute {
		return &TakeoverError{Agent: a}
	}
	return nil
}

// Expand fills an argument template. Every placeholder must have a value:
// an unfilled "{id}" passed to a CLI would be taken literally.
func Expand(tmpl []string, vars map[string]string) ([]string, error) {
	out := make([]string, len(tmpl))
	for i, arg := range tmpl {
		var b strings.Builder
		rest := arg
		for {
			open := strings.IndexByte(rest, '{')
			if open < 0 {
				b.WriteString(rest)
				break
			}
			end := strings.IndexByte(rest[open:], '}')
			if end < 0 {
				b.WriteString(rest)
				break
			}
			key := rest[open+1 : open+end]
			v, ok := vars[key]
			if !ok {
				return nil, fmt.Errorf("agents: template %q needs {%s}", arg, key)
			}
			b.WriteString(rest[:open])
			b.WriteString(v)
			rest = rest[open+end+1:]
		}
		out[i] = b.String()
	}
	return out, nil
}
