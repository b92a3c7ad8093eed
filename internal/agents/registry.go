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
	// Login is how the agent keeps its login and how a person gives it
	// one (zero when nothing is known: ready when its binary runs).
	Login Login
	// Loopback points the CLI in a throwaway HOME at a model on loopback
	// (internal/agents/sandbox, for the canaries and tests); nil for an
	// agent with no loopback set-up.
	Loopback func(home, baseURL string) (Loopback, error)
	// Verified is false for agents whose CLI is not installable here: their
	// command forms and paths come from third-party code and docs only.
	Verified bool
}

// registry holds the defined agents. It is written only while packages
// initialise (Define), before any goroutine reads it.
var registry = map[string]Agent{}

// Define adds a to the agents cast knows and returns it. Each agent's
// package calls it once, for a package variable (its agent.go): package
// variables are set before any of the package's init functions run, so
// the entry exists when they register the agent's driver, codec or login
// check. An agent is known wherever its package is linked; agents/codecs,
// which the binaries link, links them all. It panics on a nameless agent or a second definition.
func Define(a Agent) Agent {
	if a.Name == "" {
		panic("agents: Define of an agent with no name")
	}
	if _, dup := registry[a.Name]; dup {
		panic("agents: second definition of " + a.Name)
	}
	registry[a.Name] = a
	return a
}

// Lookup returns the agent registered under name.
func Lookup(name string) (Agent, bool) {
	a, ok := registry[name]
	return a, ok
}

// DisplayName is the named agent's display name ("Claude Code"), or the
// name itself for an agent this build does not know.
func DisplayName(name string) string {
	if a, ok := registry[name]; ok && a.DisplayName != "" {
		return a.DisplayName
	}
	return name
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

// Loopback is what an agent's CLI needs, beyond its HOME, to talk to a
// model on loopback.
type Loopback struct {
	// Env are the variables to add (base URLs, the fake key, switches
	// that keep the CLI off the network).
	Env []string
	// Model is the --model value a turn should pass ("" for the CLI's
	// default, which its settings point at the loopback model).
	Model string
}
