package node

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fsutil"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/runner"
)

// loginAdvice is a not-logged-in turn's reason: which agent on which node,
// exactly what to run, and what the agent itself said.
func (c Config) loginAdvice(t runner.Turn, said string) string {
	a, _ := agents.Lookup(t.Agent)
	l := a.Login
	var do string
	switch {
	case t.UserEnv != nil && l.Command != "":
		do = fmt.Sprintf("%s, or set %s in the node's agents config", l.Command, l.Key)
	case t.UserEnv != nil:
		do = "log it in as you normally do"
	default:
		do = fmt.Sprintf("it runs in its own home %s, not yours: set %s for it in the node's agents config (--agents-config), or run the node without --isolated-homes to use your own login", t.Home, orKey(l.Key))
	}
	msg := fmt.Sprintf("%s is not logged in on node %s: %s", t.Agent, c.Name, do)
	if said = strings.TrimSpace(said); said != "" {
		msg += fmt.Sprintf(" (%s said: %s)", t.Agent, said)
	}
	return msg
}

// installAdvice is a turn's reason when the agent's CLI is missing: where
// it was looked for and how to get it.
func (c Config) installAdvice(t runner.Turn, detail string) string {
	a, _ := agents.Lookup(t.Agent)
	how := fmt.Sprintf("put `%s` on the node's PATH", a.Binary)
	if a.NPMPackage != "" {
		how = fmt.Sprintf("install it (npm i -g %s)", a.NPMPackage)
	}
	return fmt.Sprintf("%s is not installed on node %s (binary not found: %s): %s, or set \"bin\" for it in the node's agents config", t.Agent, c.Name, strings.TrimSpace(detail), how)
}

func orKey(k string) string {
	if k == "" {
		return "its key"
	}
	return k
}

// readiness says whether an agent can run a turn here: its binary is there
// (an executable file: a "bin" from the agents config is taken as given,
// and an agent with no login check is ready on its binary alone) and a
// login its own CLI would accept is there, looked for by the agent's
// driver (agents.Agent.FindLogin) in its folder and the environment its
// turns get. It only looks; it never runs the agent or talks to a
// provider, so "ready" means "a login is there", not "the login works".
func (c Config) readiness(name, bin string) *castv1.AgentInstall {
	in := &castv1.AgentInstall{Name: name, Path: bin, Version: agents.InstalledVersion(bin), Accounts: c.accountNames(name), FleetLogins: c.writesFleetLogins(name)}
	switch {
	case bin == "":
		in.Status = "binary not found"
		return in
	case !fsutil.Executable(bin):
		in.Status = "binary not found: no executable file at " + bin
		return in
	}
	a, ok := agents.Lookup(name)
	if !ok {
		in.Status = "unknown agent"
		return in
	}
	s := c.agentSetup(name)
	t := c.newTurn(name, s, s.Env)
	l := a.Login
	if !a.Checked() {
		in.Ready, in.Status = true, "binary found (no login check known)"
		return in
	}
	dir := t.AgentDir()
	found, ok := a.FindLogin(dir, runner.Env(t))
	if ok {
		in.Ready, in.Status = true, found
		return in
	}
	in.Status = fmt.Sprintf("no login found in %s", dir)
	if found != "" {
		in.Status += " (" + found + ")"
	}
	if l.Command != "" {
		if t.UserEnv != nil {
			in.Status += fmt.Sprintf(": %s, or set %s", l.Command, l.Key)
		} else {
			in.Status += fmt.Sprintf(": set %s in the node's agents config", orKey(l.Key))
		}
	}
	return in
}

// Readiness describes every agent this node knows, sorted by name.
func (c Config) Readiness() []*castv1.AgentInstall {
	bins := c.bins()
	names := make([]string, 0, len(bins))
	for name := range bins {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]*castv1.AgentInstall, 0, len(names))
	for _, name := range names {
		out = append(out, c.withTurnPaths(c.readiness(name, bins[name])))
	}
	return out
}
