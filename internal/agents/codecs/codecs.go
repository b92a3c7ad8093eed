// Package codecs is the agent catalog: it links every agent package, so
// each registers its entry (and its codec and driver, where it has them)
// with package agents (each agent package imports agents, so the catalog
// cannot live there). Only the binaries (cmd/), the tests' harness
// (internal/testharness) and tests link it, so a binary knows the agents
// it links; everything else asks package agents by name (ReaderFor,
// WriterFor, CredentialFor, RefresherFor). The lookups here are those
// same ones, for the tests that link the catalog anyway.
package codecs

import (
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

// Reader returns the native reader of agent (agents.ReaderFor).
func Reader(agent string) (agents.Reader, error) { return agents.ReaderFor(agent) }

// WriterOptions configure writers that need a CLI (OpenCode loads its
// sessions through `opencode import`).
type WriterOptions struct {
	Bin string   // the agent's CLI, for writers that run it (OpenCode); default: on PATH
	Env []string // environment for such CLIs; default: this process's
}

// Writer returns the native writer of agent (agents.WriterFor).
func Writer(agent string, o WriterOptions) (agents.Writer, error) {
	return agents.WriterFor(agent, o.Bin, o.Env)
}

// Credential is agents.CredentialFor.
func Credential(agent string) (custody.Format, error) { return agents.CredentialFor(agent) }

// RefresherOptions are agents.RefresherOptions.
type RefresherOptions = agents.RefresherOptions

// Refresher is agents.RefresherFor.
func Refresher(agent string, o RefresherOptions) (custody.Refresher, error) {
	return agents.RefresherFor(agent, o)
}
