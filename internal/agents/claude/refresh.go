package claude

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/fsutil"
)

// Refresher refreshes a Claude login the way Claude Code does it for the
// user, without a model turn: `claude mcp list` with CLAUDE_CONFIG_DIR at
// the credential's folder. Claude Code 2.1.197 looks up the claude.ai MCP
// connectors for that listing, and before it does it refreshes a login
// whose expiresAt is within 5 minutes, posting to its token endpoint and
// rewriting .credentials.json (0600) with the rotated tokens. It costs no
// model tokens (docs/token-custody.md). cast itself never calls the token
// endpoint.
type Refresher struct {
	Bin string   // the claude CLI
	Env []string // the environment a turn gets (HOME, PATH, proxy, ...)
}

var _ custody.Refresher = Refresher{}

// Refresher is how a custodian refreshes a Claude login: with the CLI at
// bin and a turn's environment (the config folder is the custody one).
func (Driver) Refresher(bin string, env []string, _ string) custody.Refresher {
	return Refresher{Bin: bin, Env: env}
}

// RefreshTimeout bounds one refresh when ctx has no deadline.
const RefreshTimeout = 2 * time.Minute

// notOAuth are variables that would make the CLI use another login than
// the file (an API key, a bare access token, another cloud) or skip the
// connector lookup that triggers the refresh; the refresh runs without
// them.
var notOAuth = []string{"CLAUDE_CONFIG_DIR", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
	"CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "ENABLE_CLAUDEAI_MCP_SERVERS"}

// Refresh refreshes the .credentials.json at path in place. The CLI
// refreshes only a token expiring within 5 minutes, and custody refreshes
// earlier (its margin), so the copy's expiresAt is moved to now first:
// that date is only the CLI's own note of when to refresh, and the
// provider's answer replaces it. The caller judges the outcome by the
// file.
func (r Refresher) Refresh(ctx context.Context, agent, path string) error {
	if filepath.Base(path) != (Credential{}).File() {
		return fmt.Errorf("claude refresher: %s is not a .credentials.json", path)
	}
	if err := markDue(path, time.Now()); err != nil {
		return fmt.Errorf("claude refresher: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, RefreshTimeout)
		defer cancel()
	}
	dir := filepath.Dir(path)
	cmd := exec.CommandContext(ctx, r.Bin, "mcp", "list")
	// In the custody folder: no project's .mcp.json is read or started.
	cmd.Dir = dir
	cmd.Env = append(agents.WithoutEnv(r.Env, notOAuth...), "CLAUDE_CONFIG_DIR="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := kit.RunGroup(cmd); err != nil {
		// The output names MCP servers at most, never a token.
		return fmt.Errorf("claude refresher: claude mcp list: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// markDue sets the file's expiresAt to now unless it is earlier already.
func markDue(path string, now time.Time) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	f, err := decodeCred(raw)
	if err != nil {
		return err
	}
	if ms, ok := f.Tokens["expiresAt"].(float64); ok && int64(ms) <= now.UnixMilli() {
		return nil
	}
	f.Tokens["expiresAt"] = now.UnixMilli()
	b, err := f.Encode()
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, b, 0o600)
}
