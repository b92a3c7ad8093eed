package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/fsutil"
)

// homeLogin is an agent's current login taken from its config folder
// (`cast account add --from-home DIR`).
type homeLogin struct {
	agent, dir, path string
	cred             []byte
	tok              custody.Token
}

// loginFromHome reads the login agent keeps in dir, a CLAUDE_CONFIG_DIR or
// CODEX_HOME layout, and checks its shape before anything is sent.
func loginFromHome(agent, dir string) (*homeLogin, error) {
	f, err := agents.CredentialFor(agent)
	if err != nil {
		return nil, usagef("%v", err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, usagef("--from-home %s is not a folder (give %s's own folder: %s)", dir, agent, agentHomeHint(agent))
	}
	path := filepath.Join(dir, f.File())
	cred, err := readCredential(nil, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s holds no %s login: %s is missing (log in there first, or pass --credentials FILE)", dir, agent, path)
	}
	if err != nil {
		return nil, err
	}
	tok, err := f.Parse(cred)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &homeLogin{agent: agent, dir: dir, path: path, cred: cred, tok: tok}, nil
}

// release rewrites the home's login without its refresh token, so the
// agent run from that folder keeps its access token but never refreshes
// (docs/token-custody.md: both CLIs then use the access token as it is).
// No copy of the old file is kept: it would be a second holder of the
// refresh token.
func (h *homeLogin) release() error {
	f, err := agents.CredentialFor(h.agent)
	if err != nil {
		return err
	}
	out, err := f.AccessOnly(h.cred)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(h.path, out, 0o600)
}

// custodyNotice says what taking the login means for the folder it came
// from; "" when the login has no refresh token (an API key).
func (h *homeLogin) custodyNotice(released bool) string {
	if !h.tok.HasRefresh {
		return ""
	}
	login := "log in there again"
	if a, ok := agents.Lookup(h.agent); ok && a.Login.Command != "" {
		login = a.Login.Command + " there"
	}
	head := fmt.Sprintf("custody of this login moved to cast: from now on cast refreshes it, on one node at a time.\n"+
		"%s must not refresh it on its own any more: two holders of one refresh token revoke each other, and the provider then logs both out.\n", h.dir)
	if released {
		until := "its access token expires"
		if !h.tok.Expires.IsZero() {
			until = "its access token expires (" + h.tok.Expires.Local().Format(time.RFC3339) + ")"
		}
		return head + fmt.Sprintf("%s now holds the access token only (no refresh token); %s works until %s. To keep using that folder outside cast after that, %s (a new login of its own).\n", h.path, h.agent, until, login)
	}
	return head + fmt.Sprintf("Do one of these now: run the same command with --release-home, and cast rewrites %s without its refresh token; or %s, so the folder has a login of its own. Until then, do not run %s with that folder.\n", h.path, login, h.agent)
}

// agentHomeHint names agent's own folder for a message ("" for an
// unknown agent, which CredentialFor has refused before).
func agentHomeHint(agent string) string {
	a, _ := agents.Lookup(agent)
	return a.HomeHint()
}

// credentialHints says, for each fleet agent, which file --credentials
// takes and which folder --from-home does, from the registry.
func credentialHints() string {
	var parts []string
	for _, n := range agents.FleetAgents() {
		f, err := agents.CredentialFor(n)
		if err != nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %s or its %s", n, f.File(), agentHomeHint(n)))
	}
	return strings.Join(parts, ", ")
}
