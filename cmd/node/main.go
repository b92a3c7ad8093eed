// Command node is cast's node daemon: it runs the agent CLIs of one machine.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	_ "github.com/cast-dev/cast/internal/agents/codecs" // the agents this binary knows
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/cmdrun"
	"github.com/cast-dev/cast/internal/failpoint"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/treemove"
)

func main() {
	o := options{cfg: node.DefaultConfig()}
	cmd := cmdrun.Daemon(&cobra.Command{
		Use:   "node",
		Short: "Run a cast node daemon that dials the control plane",
		RunE: cmdrun.Logged(func() string { return o.logFormat }, func() string { return o.logLevel },
			func(cmd *cobra.Command, lg *zap.Logger) error { return run(cmd.Context(), &o, lg) }),
	})
	addFlags(cmd.Flags(), &o)
	addCLICommands(cmd)
	cmdrun.Execute(cmd)
}

// options are the node's flags: its config and what start-up reads.
type options struct {
	cfg                               node.Config
	logFormat, logLevel, agentsConfig string
	pathMap                           []string
	worktreeSetup                     string
	exitWithParent                    bool
}

// run completes the config from the files the flags name and runs the
// node.
func run(ctx context.Context, o *options, lg *zap.Logger) error {
	cfg := &o.cfg
	var err error
	if o.agentsConfig != "" {
		if cfg.Agents, err = node.LoadAgentsConfig(o.agentsConfig); err != nil {
			return err
		}
	}
	if o.worktreeSetup != "" {
		if cfg.WorktreeSetup, err = node.LoadWorktreeSetup(o.worktreeSetup); err != nil {
			return fmt.Errorf("--worktree-setup: %w", err)
		}
	}
	if cfg.PathMap, err = treemove.ParsePathMap(o.pathMap); err != nil {
		return fmt.Errorf("--map-path: %w", err)
	}
	cfg.Failpoint = failpoint.FromEnv(lg)
	lock, err := fsutil.LockDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if o.exitWithParent {
		var stop context.CancelFunc
		ctx, stop = cmdrun.UntilClosed(ctx, os.Stdin, lg)
		defer stop()
	}
	return node.Run(ctx, *cfg, lg)
}

// addFlags registers the node's flags on f.
func addFlags(f *pflag.FlagSet, o *options) {
	f.StringVar(&o.cfg.ControlPlane, "controlplane", cmdrun.EnvOr("CAST_ADDR", "127.0.0.1:7777"), "control plane gRPC address, or several replicas' as a comma-separated list tried in order (env CAST_ADDR)")
	f.StringVar(&o.cfg.DataDir, "data-dir", client.DefaultNodeDataDir(os.Getenv), "node state and agent homes")
	f.StringVar(&o.cfg.MetricsListen, "metrics-listen", "", "address for /metrics (turns by agent and outcome), /healthz and /readyz (connected), e.g. 127.0.0.1:7779: HTTPS with the node's certificate once joined (scrapers trust the control plane's CA, server name node-metrics.cast.internal); plain HTTP only with --insecure and no --ca-pin (empty: off)")
	f.StringVar(&o.cfg.Name, "name", o.cfg.Name, "node name (default: hostname)")
	f.StringArrayVar(&o.cfg.Labels, "label", nil, "label for placement and moves, repeatable (--label linux --label laptop)")
	f.StringVar(&o.cfg.CastBin, "cast-bin", node.DefaultCastBin(), "the cast CLI, given to agents as an MCP server for permission prompts (empty: off)")
	f.BoolVar(&o.cfg.IsolatedHomes, "isolated-homes", false, "run every agent with its own HOME under DATA_DIR/agents instead of your own login, settings and MCP servers (the cloud deploys' setting)")
	f.BoolVar(&o.cfg.AgentChecks, "agent-checks", o.cfg.AgentChecks, "run each installed agent CLI version nobody has checked through cast's conformance canary (in a throwaway HOME against a local fake model) at start and when a new version appears (env CAST_AGENT_CHECKS=off turns the default off)")
	f.BoolVar(&o.cfg.Probe, "probe", false, "say an agent is READY only when its CLI answers: at start, and whenever its login files or version change or it was not ready, each installed agent runs one tiny prompt headless as its turns run (your login and settings, a scratch folder, its session removed after); cast nodes then shows \"probed: \" and, on failure, what the CLI said")
	f.BoolVar(&o.cfg.Adopt, "adopt", o.cfg.Adopt, "keep every session in the agents' own folders (~/.claude/projects, ~/.codex/sessions, ~/.gemini/tmp, ~/.pi/agent/sessions), including those you run in the agents directly, as a cast session: imported once, then followed as it grows (cast ls --origin native lists them; cast restore writes one back); env CAST_ADOPT=off turns the default off")
	f.StringSliceVar(&o.cfg.AdoptAgents, "adopt-agents", nil, "adopt only these agents' sessions, comma-separated (default: every agent whose sessions cast can adopt)")
	f.DurationVar(&o.cfg.AdoptInterval, "adopt-interval", o.cfg.AdoptInterval, "how often adoption looks at the agents' folders (100ms to 1m)")
	f.BoolVar(&o.cfg.FleetAccounts, "fleet-accounts", false, "let fleet accounts (cast account) rewrite the agents' credential stores outside DATA_DIR, your own login included; each replaced version is kept in DATA_DIR/credential-backups")
	f.BoolVar(&o.cfg.TokenCustody, "token-custody", o.cfg.TokenCustody, "fleet logins through token custody: the agents' stores get the access token only, and the node elected custodian refreshes through the agent's CLI (claude and codex; docs/token-custody.md); --token-custody=false copies the stored login file instead")
	f.DurationVar(&o.cfg.CustodyInterval, "custody-interval", time.Minute, "how often token custody checks the active logins, and a switch whose credential could not be fetched is tried again")
	f.DurationVar(&o.cfg.CustodyMargin, "custody-margin", 30*time.Minute, "token custody replaces an access token this long before it expires")
	f.DurationVar(&o.cfg.ReconnectMin, "reconnect-min", o.cfg.ReconnectMin, "the first pause before the node calls an unreachable control plane again (reconnects, a turn's reports and rows); each next pause doubles, with jitter")
	f.DurationVar(&o.cfg.ReconnectMax, "reconnect-max", o.cfg.ReconnectMax, "the longest pause between calls to an unreachable control plane: how soon, at most, a node notices it is back")
	f.StringVar(&o.agentsConfig, "agents-config", "", "JSON file: per-agent {bin, home, env, args} (keys and URLs for the agents; keep it 0600)")
	f.BoolVar(&o.cfg.Insecure, "insecure", os.Getenv("CAST_INSECURE") == "1", "send the credential over plaintext to a non-loopback control plane, and serve --metrics-listen as plain HTTP without --ca-pin (env CAST_INSECURE=1)")
	f.DurationVar(&o.cfg.BundleInterval, "ca-bundle-interval", node.DefaultBundleInterval, "how often the node asks the control plane for its CA bundle, so a CA retired by cast ca retire stops being trusted even by an idle node")
	f.StringVar(&o.cfg.CAPin, "ca-pin", os.Getenv("CAST_CA_PIN"), "TLS: trust the control plane whose CA has this pin (sha256:..., logged by controlplane --tls; env CAST_CA_PIN)")
	f.StringVar(&o.cfg.JoinToken, "join-token", os.Getenv("CAST_JOIN_TOKEN"), "one-time join token (from cast node token create) exchanged on first start for this node's own credential: with --ca-pin a client certificate for a key it makes (DATA_DIR/identity.pem, renewed before expiry), else a token (DATA_DIR/credential) (env CAST_JOIN_TOKEN)")
	f.StringVar(&o.worktreeSetup, "worktree-setup", "", `JSON file {"/abs/checkout": [["npm","ci"], ...]}: commands run (no shell) in each new worktree of that checkout; must be yours and not writable by others`)
	f.StringVar(&o.cfg.WorktreeBase, "worktrees-dir", "", "where session worktrees are made (default: DATA_DIR-worktrees, beside the data dir; never inside a checkout)")
	f.StringVar(&o.cfg.WorktreeBase, "worktree-base", "", "deprecated: --worktrees-dir")
	_ = f.MarkDeprecated("worktree-base", "use --worktrees-dir")
	f.StringArrayVar(&o.pathMap, "map-path", nil, "FROM=TO: a checkout at FROM on another node lives at TO here (migrations), repeatable")
	// How controlplane --dev runs its node: hidden, they are no one
	// else's settings.
	f.BoolVar(&o.cfg.FindCastBin, "find-cast-bin", false, "while --cast-bin is empty, look for cast at each turn (beside this binary, on PATH, bin/cast in the working directory): it may be built after the node starts")
	f.BoolVar(&o.exitWithParent, "exit-with-parent", false, "stop when stdin closes: the process that started this node and holds its stdin (controlplane --dev) is gone")
	_ = f.MarkHidden("find-cast-bin")
	_ = f.MarkHidden("exit-with-parent")
	f.StringVar(&o.logFormat, "log-format", "json", "json or console")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
}
