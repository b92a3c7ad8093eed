package node

import (
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/mcpserver"
	"github.com/cast-dev/cast/internal/runner"
)

// mcpName is the server's name in every agent's config; the agents derive
// the tool names the model sees from it (mcp__cast__history,
// mcp_cast_history, cast_history).
const mcpName = "cast"

// historyOnly is `cast mcp` serving just the read-only history tool: the
// permission tool is Claude's --permission-prompt-tool and no other agent
// has a use for it.
var historyOnly = []string{"mcp", "--tools", mcpserver.HistoryTool}

// registerMCP gives the turn's agent cast's MCP server, in the form its
// CLI reads (its driver's agents.MCPTaker): flags, environment, or a file
// of cast's own under the node's data dir. Never the user's checkout, and
// never a file of the agent's own: with a shared home those are the user's
// (their settings, their MCP servers), which cast only adds to for the
// turn.
func (a *Daemon) registerMCP(t *runner.Turn, sessionID string) error {
	bin := a.castBin()
	if bin == "" {
		return nil
	}
	taker, ok := agents.DriverAs[agents.MCPTaker](t.Agent)
	if !ok {
		return nil
	}
	schema, err := mcpserver.HistoryInputSchema()
	if err != nil {
		return err
	}
	s := agents.MCPServer{
		Name: mcpName, Command: bin, Args: []string{"mcp"}, Env: a.castEnv(sessionID), SessionID: sessionID, Dir: a.mcpDir(),
		PermissionTool: mcpserver.PermissionTool, HistoryTool: mcpserver.HistoryTool, HistoryArgs: historyOnly,
		HistoryDescription: mcpserver.HistoryDescription, HistorySchema: schema,
	}
	mt := agents.MCPTurn{Args: t.Args, Env: t.Env, Home: t.Home, UserEnv: t.UserEnv}
	skipped, err := taker.TakeMCP(s, &mt)
	if err != nil {
		return err
	}
	t.Args, t.Env = mt.Args, mt.Env
	if skipped == "" {
		return nil
	}
	if _, seen := a.mcpSkips.LoadOrStore(t.Agent+"\x00"+skipped, true); !seen {
		a.lg.Warn("cast MCP server not registered for this agent", zap.String("agent", t.Agent), zap.String("why", skipped))
	}
	return nil
}

// mcpDir holds the files cast gives agents for its MCP server.
func (a *Daemon) mcpDir() string { return filepath.Join(a.cfg.DataDir, "mcp") }

// castBin is the cast CLI the agents get as their MCP server: the
// configured one, or (FindCastBin, `controlplane --dev`) the first found
// now: DefaultCastBin, else bin/cast under the working directory. `go run`
// leaves no cast next to the binary, and the README builds bin/cast after
// starting the dev setup.
func (a *Daemon) castBin() string {
	if a.cfg.CastBin != "" || !a.cfg.FindCastBin {
		return a.cfg.CastBin
	}
	if p := DefaultCastBin(); p != "" {
		return p
	}
	if wd, err := os.Getwd(); err == nil && fsutil.Executable(filepath.Join(wd, "bin", "cast")) {
		return filepath.Join(wd, "bin", "cast")
	}
	return ""
}

// castEnv is what an agent's cast (`cast mcp`, `cast spawn`) needs to
// reach the control plane about its session: the address and the node's
// credential file, or with TLS the CA pin and its certificate and key.
func (a *Daemon) castEnv(sessionID string) map[string]string {
	env := map[string]string{"CAST_SESSION": sessionID, "CAST_ADDR": a.cfg.ControlPlane}
	if a.id != nil {
		env["CAST_CA_PIN"], env["CAST_CLIENT_CERT"] = a.cfg.CAPin, a.id.Path()
		if a.trust.Hash() != "" { // the bundle, which a CA rotation changes
			env["CAST_CA_PIN"], env["CAST_CACERT"] = "", BundlePath(a.cfg.DataDir)
		}
	} else {
		env["CAST_TOKEN_FILE"] = credentialPath(a.cfg.DataDir)
	}
	if a.cfg.Insecure {
		env["CAST_INSECURE"] = "1"
	}
	return env
}
