// Package codecs maps agent names to their native readers and writers. It
// lives apart from package agents because each codec imports agents.
package codecs

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/agents/codex"
	"github.com/cast-dev/cast/internal/agents/gemini"
	"github.com/cast-dev/cast/internal/agents/grok"
	"github.com/cast-dev/cast/internal/agents/muse"
	"github.com/cast-dev/cast/internal/agents/opencode"
	"github.com/cast-dev/cast/internal/agents/pi"
	"github.com/cast-dev/cast/internal/custody"
)

var readers = map[string]agents.Reader{
	"claude": claude.Reader{}, "codex": codex.Reader{}, "gemini": gemini.Reader{},
	"pi": pi.Reader{}, "opencode": opencode.Reader{}, "grok": grok.Reader{},
	"muse": muse.Reader{},
}

// Reader returns the native reader of agent.
func Reader(agent string) (agents.Reader, error) {
	if r, ok := readers[agent]; ok {
		return r, nil
	}
	return nil, noCodec(agent, "read")
}

// WriterOptions configure writers that need a CLI (OpenCode loads its
// sessions through `opencode import`).
type WriterOptions struct {
	Bin string   // the agent's CLI, for writers that run it (OpenCode); default: on PATH
	Env []string // environment for such CLIs; default: this process's
}

// Writer returns the native writer of agent.
func Writer(agent string, o WriterOptions) (agents.Writer, error) {
	switch agent {
	case "claude":
		return claude.Writer{}, nil
	case "codex":
		return codex.Writer{}, nil
	case "gemini":
		return gemini.Writer{}, nil
	case "pi":
		return pi.Writer{}, nil
	case "grok":
		return grok.Writer{}, nil
	case "opencode":
		bin := o.Bin
		if bin == "" {
			p, err := exec.LookPath("opencode")
			if err != nil {
				return nil, fmt.Errorf("writing an OpenCode session needs the opencode CLI; install opencode-ai or pass its path")
			}
			bin = p
		}
		env := o.Env
		if env == nil {
			env = os.Environ()
		}
		return opencode.Writer{Loader: opencode.Loader{Bin: bin, Env: env}}, nil
	}
	return nil, noCodec(agent, "write")
}

func noCodec(agent, verb string) error {
	a, ok := agents.Lookup(agent)
	if !ok {
		return fmt.Errorf("unknown agent %q; use one of %s", agent, strings.Join(agents.Names(), ", "))
	}
	return fmt.Errorf("cast cannot %s %s transcripts: %s sessions do not take over history", verb, a.DisplayName, a.DisplayName)
}

// credentials are the login files token custody covers.
var credentials = map[string]custody.Format{"claude": claude.Credential{}, "codex": codex.Credential{}}

// Credential returns how agent's login file is read and trimmed for token
// custody; an error for an agent whose logins custody does not cover.
func Credential(agent string) (custody.Format, error) {
	if f, ok := credentials[agent]; ok {
		return f, nil
	}
	if _, ok := agents.Lookup(agent); !ok {
		return nil, fmt.Errorf("unknown agent %q; use one of %s", agent, strings.Join(agents.Names(), ", "))
	}
	return nil, fmt.Errorf("fleet accounts do not cover %s logins (claude and codex only)", agent)
}

// RefresherOptions are what a custodian runs the agent's CLI with.
type RefresherOptions struct {
	Bin  string   // the CLI
	Env  []string // its environment, as a turn gets it
	Home string   // its own folder (CODEX_HOME, ...), whose settings apply
}

// Refresher returns how a custodian refreshes agent's login through its
// CLI. Claude has none: it refreshes only inside a turn
// (docs/token-custody.md).
func Refresher(agent string, o RefresherOptions) (custody.Refresher, error) {
	if agent == "codex" {
		return codex.Refresher{Bin: o.Bin, Env: o.Env, ConfigFrom: o.Home}, nil
	}
	return nil, fmt.Errorf("token custody cannot refresh %s logins: no way to refresh outside a turn", agent)
}
