package codex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/fsutil"
)

// Refresher refreshes a ChatGPT login the way Codex does it for the user:
// it starts `codex app-server` with CODEX_HOME at the credential's folder
// and asks for the account with refreshToken, which makes Codex 0.171
// refresh its tokens and rewrite auth.json (it also refreshes an expired
// token at start). No model turn runs. cast itself never calls the token
// endpoint (docs/token-custody.md).
type Refresher struct {
	Bin string   // the codex CLI
	Env []string // the environment without CODEX_HOME (HOME, PATH, ...)
	// ConfigFrom is the CODEX_HOME whose config.toml the refresh runs with
	// (the endpoints the user's Codex uses); "" runs with Codex's defaults.
	ConfigFrom string
}

var _ custody.Refresher = Refresher{}

// Refresher is how a custodian refreshes a Codex login: with the CLI at
// bin, a turn's environment, and home's config.toml.
func (Driver) Refresher(bin string, env []string, home string) custody.Refresher {
	return Refresher{Bin: bin, Env: env, ConfigFrom: home}
}

// Refresh runs the refresh on the auth.json at path. The caller judges the
// outcome by the file: an account/read error after the refresh (its other
// lookups) is not a failed refresh.
func (r Refresher) Refresh(ctx context.Context, agent, path string) error {
	if filepath.Base(path) != (Credential{}).File() {
		return fmt.Errorf("codex refresher: %s is not an auth.json", path)
	}
	home := filepath.Dir(path)
	env := append(agents.WithoutEnv(r.Env, "CODEX_HOME"), "CODEX_HOME="+home)
	if r.ConfigFrom != "" {
		cfg, err := os.ReadFile(filepath.Join(r.ConfigFrom, "config.toml"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("codex refresher: %w", err)
		}
		if err == nil {
			if err := fsutil.WriteFileAtomic(filepath.Join(home, "config.toml"), cfg, 0o600); err != nil {
				return fmt.Errorf("codex refresher: %w", err)
			}
		}
	}
	s, err := StartAppServer(ctx, r.Bin, env, home)
	if err != nil {
		return fmt.Errorf("codex refresher: %w", err)
	}
	defer s.Close()
	return s.Call(ctx, "account/read", map[string]any{"refreshToken": true}, nil)
}
