package agents

import (
	"fmt"
	"strings"

	"github.com/cast-dev/cast/internal/custody"
)

// Credentialed is a Driver whose agent's login file token custody can
// hold (Claude's .credentials.json, Codex's auth.json).
type Credentialed interface{ Credential() custody.Format }

// CredentialFor returns how agent's login file is read and trimmed for
// token custody; an error for an agent whose logins custody does not
// cover.
func CredentialFor(agent string) (custody.Format, error) {
	if _, ok := Lookup(agent); !ok {
		return nil, fmt.Errorf("unknown agent %q; use one of %s", agent, strings.Join(Names(), ", "))
	}
	if f := credentialOf(agent); f != nil {
		return f, nil
	}
	var covered []string
	for _, n := range Names() {
		if credentialOf(n) != nil {
			covered = append(covered, n)
		}
	}
	return nil, fmt.Errorf("fleet accounts do not cover %s logins (%s only)", agent, strings.Join(covered, " and "))
}

// ParseCredential reads raw, a login file of agent's, as token custody
// orders it (CredentialFor's format); an error for a file that does not
// read or an agent whose logins custody does not cover.
func ParseCredential(agent string, raw []byte) (custody.Token, error) {
	f, err := CredentialFor(agent)
	if err != nil {
		return custody.Token{}, err
	}
	return f.Parse(raw)
}

// credentialOf is the credential format agent's driver gives (nil: none).
func credentialOf(agent string) custody.Format {
	if c, ok := DriverAs[Credentialed](agent); ok {
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

// Refreshing is a Driver whose CLI can refresh a login without a model
// turn (docs/token-custody.md): Codex through `codex app-server`, Claude
// through `claude mcp list`.
type Refreshing interface {
	Refresher(bin string, env []string, home string) custody.Refresher
}

// RefresherFor returns how a custodian refreshes agent's login through
// its CLI.
func RefresherFor(agent string, o RefresherOptions) (custody.Refresher, error) {
	if r, ok := DriverAs[Refreshing](agent); ok {
		return r.Refresher(o.Bin, o.Env, o.Home), nil
	}
	return nil, fmt.Errorf("token custody cannot refresh %s logins: its CLI has no refresh cast can run", agent)
}
