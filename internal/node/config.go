// Package node is the node daemon: it dials the control plane (so it
// works behind NAT), keeps one Connect stream with heartbeats, receives
// commands for the sessions it owns and keeps its bookkeeping in its data
// dir so a restart resumes where it stopped.
package node

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fence"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/treemove"
)

// CapabilityVersion is what this node can do; the control plane may refuse
// or adapt commands for older nodes.
//   - 1: v0.1.
//   - 2 (fence.CapabilityTurnAgent): names the agent of a turn's start and
//     holds a turn refused with AGENT_SWITCHED / SESSION_ARCHIVED; a switch
//     interrupts an older node's turn about to start, which the store
//     cannot refuse.
const CapabilityVersion = fence.CapabilityTurnAgent

// Defaults.
const (
	DefaultReconnectMin = 200 * time.Millisecond
	DefaultReconnectMax = 10 * time.Second
)

// Config configures a node daemon.
type Config struct {
	ControlPlane string // gRPC address of the control plane
	// MetricsListen serves /metrics, /healthz and /readyz (empty: off):
	// HTTPS with the node's certificate (CAPin), plain HTTP only with
	// Insecure.
	MetricsListen string
	DataDir       string   // state, agent homes, transcripts
	Name          string   // unique node name (default: hostname)
	Labels        []string // user labels, e.g. linux, laptop
	ReconnectMin  time.Duration
	ReconnectMax  time.Duration
	// ReadinessInterval is how often the node looks at its agents again
	// and updates what `cast nodes` shows (DefaultReadinessInterval).
	ReadinessInterval time.Duration
	// AgentBins maps agent name to binary name looked up on PATH (or an
	// absolute path).
	AgentBins map[string]string
	// Agents overrides per-agent setup (home, extra env, extra args).
	Agents map[string]AgentSetup
	// IsolatedHomes gives every agent its own HOME under DataDir (the cloud
	// deploys' choice). Off (the default on a personal machine), an agent
	// without a "home" in the agents config runs as the user has it: the
	// user's HOME and environment (UserEnv), so their login, settings and MCP
	// servers, and the sessions cast writes show in the agent's own picker.
	IsolatedHomes bool
	// UserEnv is the environment the user's own agents run with (default:
	// the node's own); its HOME is theirs.
	UserEnv []string
	// FleetAccounts lets fleet accounts rewrite a credential store cast
	// does not own (outside DataDir: the user's own login). Each rewrite
	// first copies the file it replaces to DataDir/credential-backups.
	FleetAccounts bool
	// TokenCustody takes fleet accounts through token custody
	// (docs/token-custody.md): the agent's store gets the access token
	// only, and the node refreshes logins it is custodian of through the
	// agent's CLI. Agents without a CLI refresher keep the copied file.
	// On by default; a control plane without custody makes the node copy
	// the stored file as before.
	TokenCustody bool
	// CustodyInterval is how often custody runs, and a switch whose copy
	// failed for now is tried again (default 1m); CustodyMargin
	// how long before expiry a token is replaced (default 30m).
	CustodyInterval time.Duration
	CustodyMargin   time.Duration
	// CastBin is the cast CLI, registered in the agents as an MCP server
	// (`cast mcp`) for permission prompts and history; "" disables it.
	CastBin string
	// FindCastBin looks for cast at each turn while CastBin is empty
	// (DefaultCastBin), for a setup started before cast was built.
	FindCastBin bool
	// PathMap maps a migrating session's checkout path on its source node
	// to this node's path for it (--map-path FROM=TO).
	PathMap treemove.PathMap
	// JoinToken is exchanged once, when DataDir holds no credential yet,
	// for this node's own credential (--join-token, env CAST_JOIN_TOKEN).
	JoinToken string
	// BundleInterval is how often the node asks for the control plane's
	// trust bundle (--ca-bundle-interval; DefaultBundleInterval), so a CA
	// retired while it makes no call stops being trusted then, not at its
	// next renewal days later.
	BundleInterval time.Duration
	// CAPin, when set, makes every call TLS to a control plane whose CA
	// has this pin (--ca-pin, env CAST_CA_PIN; "sha256:...").
	CAPin string
	// Insecure allows plaintext to a non-loopback control plane, and plain
	// HTTP on MetricsListen without CAPin.
	Insecure bool
	// WorktreeBase is where git worktrees for sessions with a worktree
	// branch are made (--worktrees-dir; default: beside DataDir, see
	// worktreesDir); never inside the checkout they come from.
	WorktreeBase string
	// WorktreeSetup runs commands in new worktrees of listed checkouts
	// (--worktree-setup FILE, owned by the node's user).
	WorktreeSetup WorktreeSetup
	// AgentChecks runs the conformance canary (internal/canary) for every
	// installed agent version nobody has checked yet, at start and when a
	// new version appears (--agent-checks; default on unless the
	// environment has CAST_AGENT_CHECKS=off).
	AgentChecks bool
	// Probe makes READY come from running each installed agent's CLI once
	// (probe.go) instead of looking at its login files (--probe).
	Probe bool
	// ProbeTimeout bounds one probe (runner.DefaultProbeTimeout when 0).
	ProbeTimeout time.Duration
	// Adopt keeps every session in the agents' own folders, including
	// those the user runs in the agents directly, as a cast session
	// (internal/adopt; --adopt, on by default). AdoptAgents narrows it to
	// these agents (--adopt-agents); the environment's CAST_ADOPT=off turns
	// the default off (tests). AdoptInterval is how often the
	// folders are looked at (DefaultAdoptInterval).
	Adopt         bool
	AdoptAgents   []string
	AdoptInterval time.Duration
	// Failpoint, when set, is called at migration steps and at a turn's
	// start and end with their name (fault tests kill or stop the process
	// there).
	Failpoint func(name string)
}

// AgentSetup is how the node runs one agent.
type AgentSetup struct {
	Bin string // absolute path; default: AgentBins looked up on PATH
	// Home is the agent's own HOME; default: the user's (UserEnv), or
	// DataDir/agents/<name> with IsolatedHomes.
	Home string
	Env  []string // extra environment (provider URLs, keys)
	Args []string // extra CLI arguments (approval settings)
	// Accounts are named credential sets for this agent: a session with
	// an account runs with that account's HOME and environment on top of
	// the agent's (`cast handoff --account NAME`).
	Accounts map[string]AccountSetup
	// own: Home is the user's own and the agent runs with UserEnv.
	own bool
}

// AccountSetup is one named credential set of an agent.
type AccountSetup struct {
	Home string   // default: DataDir/agents/<agent>@<account>
	Env  []string // added after the agent's Env, so its keys win
}

// accountSetup is agentSetup for a session's account ("" is the agent's
// default setup). An account this node does not have is an error that says
// where to add it.
func (c Config) accountSetup(agent, account string) (AgentSetup, error) {
	s := c.agentSetup(agent)
	if account == "" {
		return s, nil
	}
	acc, ok := s.Accounts[account]
	if !ok {
		return s, fmt.Errorf("account %q is not set up for %s on node %s; add it under %q.accounts in the node's --agents-config", account, agent, c.Name, agent)
	}
	s.Home, s.own = acc.Home, false
	if s.Home == "" {
		s.Home = filepath.Join(c.DataDir, "agents", agent+"@"+account)
	}
	// Where the agent keeps its state follows the account's HOME: drop the
	// agent's own pointers (the runner derives them from HOME) so two
	// accounts never share a credential store.
	var env []string
	own := homeVars()
	for _, kv := range s.Env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(own, k) && !strings.HasPrefix(k, "XDG_") {
			env = append(env, kv)
		}
	}
	s.Env = append(env, acc.Env...)
	return s, nil
}

// accountNames are the agent's named credential sets, sorted (advertised
// so the control plane refuses an unknown `--account` up front).
func (c Config) accountNames(agent string) []string {
	return slices.Sorted(maps.Keys(c.Agents[agent].Accounts))
}

// homeVars point an agent at its state; an account brings its own. A
// function, not a variable: the agents register when the binary's
// catalog is initialised, which need not be before this package.
func homeVars() []string { return append([]string{"HOME", "TMPDIR"}, agents.HomeVars()...) }

// agentSetup fills the defaults for one agent.
func (c Config) agentSetup(name string) AgentSetup {
	s := c.Agents[name]
	switch {
	case s.Home != "":
	case c.IsolatedHomes:
		s.Home = filepath.Join(c.DataDir, "agents", name)
	default:
		s.Home, s.own = c.userHome(), true
	}
	if s.Bin == "" {
		if bin := c.AgentBins[name]; bin != "" {
			if p, err := exec.LookPath(bin); err == nil {
				s.Bin = p
			}
		}
	}
	return s
}

// userHome is the user's HOME, as the agents they run themselves see it.
func (c Config) userHome() string { return runner.EnvValue(c.UserEnv, "HOME") }

// newTurn starts a runner.Turn of agent for setup s (env: its extra
// environment): the user's own agent runs with the user's environment, any
// other in its isolated Home.
func (c Config) newTurn(agent string, s AgentSetup, env []string) runner.Turn {
	t := runner.Turn{Agent: agent, Home: s.Home, Env: env, Args: s.Args}
	if s.own {
		t.UserEnv = c.UserEnv
	}
	return t
}

// bins are the absolute CLI paths known up front, for the runner.
func (c Config) bins() map[string]string {
	out := map[string]string{}
	for name := range c.AgentBins {
		if s := c.agentSetup(name); s.Bin != "" {
			out[name] = s.Bin
		}
	}
	for name, s := range c.Agents {
		if s.Bin != "" {
			out[name] = s.Bin
		}
	}
	return out
}

// knownListers: every name is an agent whose sessions adoption finds.
func knownListers(names []string) bool {
	for _, n := range names {
		if !slices.Contains(agents.Listers(), n) {
			return false
		}
	}
	return true
}

// DefaultConfig returns defaults; Name is the hostname.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Name:              host,
		UserEnv:           os.Environ(),
		ReconnectMin:      DefaultReconnectMin,
		ReconnectMax:      DefaultReconnectMax,
		ReadinessInterval: DefaultReadinessInterval,
		AgentChecks:       os.Getenv("CAST_AGENT_CHECKS") != "off",
		AgentBins:         defaultBins(),
		TokenCustody:      true,
		Adopt:             os.Getenv("CAST_ADOPT") != "off",
		AdoptInterval:     DefaultAdoptInterval,
	}
}

// DefaultAdoptInterval is how often adoption looks at the agents' folders:
// a session the user runs in an agent directly is in cast seconds later.
const DefaultAdoptInterval = 2 * time.Second

// defaultBins are the registry's binary names, by agent.
func defaultBins() map[string]string {
	bins := map[string]string{}
	for _, n := range agents.Names() {
		a, _ := agents.Lookup(n)
		bins[n] = a.Binary
	}
	return bins
}

// DefaultCastBin is cast next to the running binary, else cast on PATH
// ("" when neither exists).
func DefaultCastBin() string {
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), "cast"); fsutil.Executable(p) {
			return p
		}
	}
	if p, err := exec.LookPath("cast"); err == nil {
		return p
	}
	return ""
}

// Validate checks c.
func (c Config) Validate() error {
	switch {
	case c.ControlPlane == "":
		return fmt.Errorf("--controlplane (or CAST_ADDR) is required")
	case c.DataDir == "":
		return fmt.Errorf("--data-dir is required")
	case !ids.ValidName(c.Name):
		return fmt.Errorf("node name %q is malformed; use letters, digits, '.', '_' or '-'", c.Name)
	case c.ReconnectMin <= 0 || c.ReconnectMax < c.ReconnectMin:
		return fmt.Errorf("--reconnect-min must be positive and at most --reconnect-max (%s, %s)", c.ReconnectMin, c.ReconnectMax)
	case c.ReadinessInterval <= 0:
		return fmt.Errorf("the readiness interval must be positive")
	case c.Adopt && (c.AdoptInterval < 100*time.Millisecond || c.AdoptInterval > time.Minute):
		return fmt.Errorf("the adopt interval must be between 100ms and 1m")
	case c.Adopt && !knownListers(c.AdoptAgents):
		return fmt.Errorf("--adopt-agents takes agents whose sessions cast can adopt: %s", strings.Join(agents.Listers(), ", "))
	case c.WorktreeBase != "" && !filepath.IsAbs(c.WorktreeBase):
		return fmt.Errorf("--worktrees-dir %q must be an absolute path", c.WorktreeBase)
	case c.MetricsListen != "" && c.CAPin == "" && !c.Insecure:
		return fmt.Errorf("--metrics-listen serves HTTPS with the node's certificate, which needs --ca-pin; for plain HTTP give --insecure (env CAST_INSECURE=1)")
	case !c.IsolatedHomes && !filepath.IsAbs(c.userHome()):
		return fmt.Errorf("HOME is not set to an absolute path, so the node cannot run your own agents; set HOME or pass --isolated-homes")
	}
	for _, l := range c.Labels {
		if !ids.ValidName(l) {
			return fmt.Errorf("label %q is malformed; use letters, digits, '.', '_' or '-'", l)
		}
	}
	return nil
}

// labels returns the node's labels: os and hostname first, then the user's.
// worktreesDir is where worktrees go: --worktrees-dir, else a folder
// beside the data dir (DATA_DIR-worktrees), so nothing of a checkout ever
// lands in the node's own state.
func (c Config) worktreesDir() string {
	if c.WorktreeBase != "" {
		return c.WorktreeBase
	}
	d := filepath.Clean(c.DataDir)
	return filepath.Join(filepath.Dir(d), filepath.Base(d)+"-worktrees")
}

func (c Config) labels() []string {
	host, _ := os.Hostname()
	out := []string{runtime.GOOS}
	if ids.ValidName(host) {
		out = append(out, host)
	}
	seen := map[string]bool{}
	for _, l := range out {
		seen[l] = true
	}
	for _, l := range c.Labels {
		if !seen[l] {
			out, seen[l] = append(out, l), true
		}
	}
	return out
}

// LoadAgentsConfig reads a JSON object mapping agent names to AgentSetup
// ({"claude": {"bin": "...", "home": "...", "env": ["K=V"], "args": []}}).
// The file may hold API keys, so it must not be readable by others.
func LoadAgentsConfig(path string) (map[string]AgentSetup, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %o); it may hold keys: chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw map[string]struct {
		Bin      string   `json:"bin"`
		Home     string   `json:"home"`
		Env      []string `json:"env"`
		Args     []string `json:"args"`
		Accounts map[string]struct {
			Home string   `json:"home"`
			Env  []string `json:"env"`
		} `json:"accounts"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]AgentSetup{}
	for name, r := range raw {
		if _, ok := agents.Lookup(name); !ok {
			return nil, fmt.Errorf("%s: unknown agent %q", path, name)
		}
		for _, p := range []string{r.Bin, r.Home} {
			if p != "" && !filepath.IsAbs(p) {
				return nil, fmt.Errorf("%s: %s paths must be absolute (%q)", path, name, p)
			}
		}
		setup := AgentSetup{Bin: r.Bin, Home: r.Home, Env: r.Env, Args: r.Args}
		for acc, a := range r.Accounts {
			if !ids.ValidName(acc) {
				return nil, fmt.Errorf("%s: %s account name %q is malformed", path, name, acc)
			}
			if a.Home != "" && !filepath.IsAbs(a.Home) {
				return nil, fmt.Errorf("%s: %s account %s home must be absolute (%q)", path, name, acc, a.Home)
			}
			if setup.Accounts == nil {
				setup.Accounts = map[string]AccountSetup{}
			}
			setup.Accounts[acc] = AccountSetup{Home: a.Home, Env: a.Env}
		}
		out[name] = setup
	}
	return out, nil
}
