// Package sandbox points an agent CLI in a throwaway HOME at a model on
// loopback (internal/fakemodel): Setup runs the agent's own loopback set-up
// (agents.Agent.Loopback), which writes the settings it needs under HOME
// (JSON ones with WriteJSON) and returns the environment the CLI needs.
// The tests' isolated environments (agenttest.Env) and the conformance
// canaries (internal/canary) share it, so the configuration the canaries
// run with is the one the real-CLI tests prove. Setup writes nothing
// outside the HOME it is given.
package sandbox

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fsutil"
)

// Names the fake provider uses in every agent's config.
const (
	FakeModel    = "fake-model"
	FakeProvider = "fake"
	FakeAPIKey   = "sk-fake-key-for-loopback"
)

// Setup writes agent's settings for a model at baseURL (scheme://host:port,
// no path) under home, laid out as an isolated turn's HOME is
// (agents.Agent.NativeHome: ~/.codex, ~/.gemini, ~/.pi/agent, XDG dirs under
// home), and returns the environment the CLI needs on top of that HOME.
// What each agent needs is its own package's (agents.Agent.Loopback).
func Setup(agent, home, baseURL string) (agents.Loopback, error) {
	a, ok := agents.Lookup(agent)
	if !ok || a.Loopback == nil {
		return agents.Loopback{}, fmt.Errorf("sandbox: no loopback setup for agent %q", agent)
	}
	return a.Loopback(home, strings.TrimRight(baseURL, "/"))
}

// WriteJSON saves v as an indented JSON settings file, making its folder.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	// It holds the fake key only; 0600 anyway, as every file naming a key.
	return fsutil.WritePrivate(path, append(b, '\n'))
}
