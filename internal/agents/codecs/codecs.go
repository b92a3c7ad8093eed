// Package codecs links every agent package, so each registers its codec
// and driver with package agents, and hands out native readers, writers
// and login formats by agent name. It lives apart from package agents
// because each agent package imports agents.
package codecs

import (
	"fmt"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
	_ "github.com/cast-dev/cast/internal/agents/claude"
	_ "github.com/cast-dev/cast/internal/agents/codex"
	_ "github.com/cast-dev/cast/internal/agents/cursor"
	_ "github.com/cast-dev/cast/internal/agents/gemini"
	_ "github.com/cast-dev/cast/internal/agents/grok"
	_ "github.com/cast-dev/cast/internal/agents/muse"
	_ "github.com/cast-dev/cast/internal/agents/opencode"
	_ "github.com/cast-dev/cast/internal/agents/pi"
	"github.com/cast-dev/cast/internal/custody"
)

// Reader returns the native reader of agent (agents.RegisterCodec).
func Reader(agent string) (agents.Reader, error) { return agents.ReaderFor(agent) }

// WriterOptions configure writers that need a CLI (OpenCode loads its
// sessions through `opencode import`).
type WriterOptions struct {
	Bin string   // the agent's CLI, for writers that run it (OpenCode); default: on PATH
	Env []string // environment for such CLIs; default: this process's
}

// Writer returns the native writer of agent (agents.RegisterCodec).
func Writer(agent string, o WriterOptions) (agents.Writer, error) {
	return agents.WriterFor(agent, o.Bin, o.Env)
}

// credentialed is a driver whose agent's login file token custody can
// hold.
type credentialed interface{ Credential() custody.Format }

// Credential returns how agent's login file is read and trimmed for token
// custody; an error for an agent whose logins custody does not cover.
func Credential(agent string) (custody.Format, error) {
	if _, ok := agents.Lookup(agent); !ok {
		return nil, fmt.Errorf("unknown agent %q; use one of %s", agent, strings.Join(agents.Names(), ", "))
	}
	if f := credentialOf(agent); f != nil {
		return f, nil
	}
	var covered []string
	for _, n := range agents.Names() {
		if credentialOf(n) != nil {
			covered = append(covered, n)
		}
	}
	return nil, fmt.Errorf("fleet accounts do not cover %s logins (%s only)", agent, strings.Join(covered, " and "))
}

// credentialOf is the credential format agent's driver gives (nil: none).
func credentialOf(agent string) custody.Format {
	a, _ := agents.Lookup(agent)
	d, _ := a.Driver()
	if c, ok := d.(credentialed); ok {
		return c.Credential()
	}
	return nil
}

// RefresherOptions are what a custodian runs the agent's CLI with.
type RefresherOptions struct {
	Bin  string   // the CLI
	Env  []string // its environment, as a turn gets it
	Home string   // its own folder (CODEX_HOME, ...), whose settings apply
}

// refreshing is a driver whose CLI can refresh a login without a model
// turn (docs/token-custody.md): Codex through `codex app-server`, Claude
// through `claude mcp list`.
type refreshing interface {
	Refresher(bin string, env []string, home string) custody.Refresher
}

// Refresher returns how a custodian refreshes agent's login through its
// CLI.
func Refresher(agent string, o RefresherOptions) (custody.Refresher, error) {
	a, _ := agents.Lookup(agent)
	d, _ := a.Driver()
	if r, ok := d.(refreshing); ok {
		return r.Refresher(o.Bin, o.Env, o.Home), nil
	}
	return nil, fmt.Errorf("token custody cannot refresh %s logins: its CLI has no refresh cast can run", agent)
}
