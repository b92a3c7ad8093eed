// Package controlplane is cast's gRPC control plane: handlers that validate
// requests, call the cores that know nothing of gRPC (store, moves,
// migrate, fleet, archive, authz, ...) and map their typed errors to
// statuses in one place (status.go); the node streams' relay and dispatch;
// and, not yet in cores of their own, the first CA's and the first admin
// token's bootstrap (ca.go, authservice.go), credential and join token
// issue (authservice.go) and workspace requests relayed to nodes
// (workspaces.go). The CA rotation's steps are internal/catrust's, naming
// a caller is internal/authn's and deciding what it may do
// internal/authz's; ReportTurn is one call into internal/turnstate.
package controlplane

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/brief"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/fanout"
	"github.com/cast-dev/cast/internal/fence"
	"github.com/cast-dev/cast/internal/fleet"
	"github.com/cast-dev/cast/internal/fsutil"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/migrate"
	"github.com/cast-dev/cast/internal/netaddr"
	"github.com/cast-dev/cast/internal/objstore"
	"github.com/cast-dev/cast/internal/oidcauth"
	"github.com/cast-dev/cast/internal/retention"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/web"
)

// Defaults.
const (
	DefaultListen            = "127.0.0.1:7777"
	DefaultMetricsListen     = "127.0.0.1:7778"
	DefaultLeaseTTL          = 10 * time.Second
	DefaultHeartbeatInterval = 3 * time.Second
	// DefaultSeenEvery is how often a connected node's last_seen_time is
	// written: heartbeats renew its lease without an etcd write, and this
	// one write per node per SeenEvery is all a fleet's heartbeats cost.
	DefaultSeenEvery       = 30 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultMaxRecvBytes bounds one gRPC request: what clients send at
	// most. Larger messages than one etcd request can carry are chunked by
	// the store.
	DefaultMaxRecvBytes = client.MaxRequestBytes
	// DefaultNodeQueue is how many live frames may wait for a node that
	// is slow to read before its stream is cut.
	DefaultNodeQueue = 1024
	// DefaultRefusalLog is how often each peer's refusals get a line.
	DefaultRefusalLog = 10 * time.Second
	// DefaultSessionCount is how often cast_sessions is recounted.
	DefaultSessionCount = 30 * time.Second
	// CapabilityVersion is what this control plane speaks to nodes: the
	// newest node capability it knows (node.CapabilityVersion). It serves
	// older ones too: a switch interrupts a turn about to start on a node
	// below fence.CapabilityTurnAgent (moves.interruptTurn).
	CapabilityVersion = fence.CapabilityTurnAgent
)

// Config configures a control plane replica.
type Config struct {
	Listen        string        // gRPC address
	MetricsListen string        // HTTPS (HTTP with --insecure) address for /metrics, /healthz, /readyz; "" disables
	EtcdEndpoints []string      // an external etcd; empty means embedded in DataDir
	Etcd          store.Access  // TLS and auth to the external etcd
	DataDir       string        // embedded etcd data
	EtcdClient    string        // embedded etcd client address (port 0: pick)
	LeaseTTL      time.Duration // node liveness lease
	Heartbeat     time.Duration // interval nodes are told to heartbeat at
	SeenEvery     time.Duration // a node's last_seen_time is written at most this often
	Shutdown      time.Duration // GracefulStop deadline before Stop
	MaxRecvBytes  int
	// Pprof adds Go's /debug/pprof/ to the MetricsListen listener: a heap
	// profile after a forced collection (?gc=1) is what shows what open
	// streams hold, apart from garbage not yet collected.
	Pprof bool
	// SessionCount is how often cast_sessions is recounted from the store
	// (one paged read of every session).
	SessionCount time.Duration
	NodeQueue    int    // live frames queued per node stream; a full queue cuts the stream
	ReplicaID    string // names this replica in node connection records
	Store        store.Config
	// Objects is where history beyond etcd goes (a folder, or an S3
	// bucket); neither set: it stays in etcd. Tier is what moves there.
	Objects objstore.Config
	Tier    store.TierConfig
	// Retention purges sessions idle past their creator's window
	// (--retain); no rules: nothing is ever purged but by `cast rm --purge`.
	Retention retention.Config
	Brief     brief.Config // the small model that writes handoff briefs
	Migrate   migrate.Config
	// Failpoint, when set, is called at the named points of the moves
	// within the control plane (moves.FailSwitchBeforeWrite), for fault
	// tests; the migration's are Migrate.Failpoint.
	Failpoint func(name string)
	// MaxWorkTreeBytes bounds a work tree relayed during a migration.
	MaxWorkTreeBytes int64
	// SecretsKeyFile holds the key fleet account credentials and the TLS
	// CA's key are sealed with (hex, mode 0600), created on first start.
	// Outside Dev it may not lie in DataDir (symlinks resolved): a copy of
	// the data dir (a backup, a disk) must not carry the key that opens
	// it; cmd/controlplane defaults it to DefaultSecretsKeyFile. Empty:
	// DataDir/secrets.key with Dev, else no key (fleet accounts and --tls
	// are refused).
	SecretsKeyFile string
	// Dev is --dev: one local process, whose secrets key may live in its
	// data dir.
	Dev bool
	// SecretsKey is the key itself, in hex, from CAST_SECRETS_KEY (env only:
	// flags show in ps). It wins over SecretsKeyFile; for Kubernetes, whose
	// Secret files cannot be 0600 and the non-root user's at once.
	SecretsKey string
	Fleet      fleet.Config
	// TokenCustody keeps one writer per token family for Claude and Codex
	// logins (docs/token-custody.md): an account's login is held by one
	// custodian node, and nodes started with --token-custody get the
	// access token only. On by default; off without a secrets key (fleet
	// accounts are refused then anyway).
	TokenCustody bool
	Auth         AuthConfig
	TLS          TLSConfig
	// Insecure allows plaintext gRPC without TLS (--insecure; --dev on
	// loopback sets it); it is logged as a warning at every start.
	Insecure bool
	// Limits bound each user's request rate, append rate and open
	// streams; NodeLimits each node's.
	Limits     authz.Limits
	NodeLimits authz.Limits
	// PeerLimits bound each peer address's calls without a credential
	// and, apart, its calls whose credential names no one (Rate, Burst).
	PeerLimits authz.Limits
	// RefusalLog is how often each peer's refused requests get an audit
	// line; the rest are counted and logged as counts (refusallog.go).
	RefusalLog time.Duration
	// Watch tunes the fan-out of the replica's one session feed to its
	// WatchSession streams: each stream's buffer and each principal's
	// cap on open watches (which holds admins too, unlike Limits).
	Watch fanout.Config
	// Publish, if set, writes the CA bundle and a node join Secret into
	// the Kubernetes namespace the replica runs in (--publish-k8s). It
	// needs TLS: the join Secret carries the CA's pin.
	Publish KubePublisher
	// NodeHello, if set, is told each node's hello (its name, labels and
	// agents) as its stream opens: controlplane --dev logs which of its
	// node's agents are ready from it.
	NodeHello func(*castv1.Node)
	// Web serves the web timeline (internal/web) on its own listener:
	// off until Web.Listen is set (--web-listen; --dev sets it).
	Web web.Config
}

// AuthConfig configures who may call the control plane (auth.go). Every
// call needs a token; there is no switch to turn that off.
type AuthConfig struct {
	// AdminTokenFile receives the first admin token on the store's first
	// start (0600). Empty: DataDir/admin.token.
	AdminTokenFile string
	// BootstrapToken, if set, is the first admin token's value instead of
	// a random one (env CAST_BOOTSTRAP_TOKEN; never a flag).
	BootstrapToken string
	// OIDC lets people in with an ID token from this issuer (--oidc-*),
	// beside the tokens an admin makes; off without an issuer.
	OIDC oidcauth.Config
}

// DefaultConfig returns a Config for a local single process.
func DefaultConfig() Config {
	return Config{
		Listen:        DefaultListen,
		MetricsListen: DefaultMetricsListen,
		EtcdClient:    "127.0.0.1:0",
		LeaseTTL:      DefaultLeaseTTL,
		Heartbeat:     DefaultHeartbeatInterval,
		SeenEvery:     DefaultSeenEvery,
		Shutdown:      DefaultShutdownTimeout,
		MaxRecvBytes:  DefaultMaxRecvBytes,
		NodeQueue:     DefaultNodeQueue,
		SessionCount:  DefaultSessionCount,
		Store:         store.DefaultConfig(),
		Tier:          store.DefaultTierConfig(),
		Retention:     retention.DefaultConfig(),
		Migrate:       migrate.DefaultConfig(),
		Fleet:         fleet.DefaultConfig(),
		Limits:        authz.DefaultLimits(),
		NodeLimits:    authz.DefaultNodeLimits(),
		PeerLimits:    authz.DefaultPeerLimits(),
		RefusalLog:    DefaultRefusalLog,
		Watch:         fanout.DefaultConfig(),
		Web:           web.DefaultConfig(),
		TLS:           TLSConfig{NodeCertTTL: DefaultNodeCertTTL, UserCertTTL: DefaultUserCertTTL},
		Auth:          AuthConfig{OIDC: oidcauth.DefaultConfig()},

		MaxWorkTreeBytes: DefaultMaxWorkTreeBytes,
		TokenCustody:     true,
	}
}

// Validate checks c, part by part.
func (c Config) Validate() error {
	for _, check := range []func() error{
		c.validateListeners, c.validateObjects, c.validateEtcd, c.Web.Validate, c.validateTimes,
		c.validateSecurity, c.validateLimits,
		c.Migrate.Validate, c.Fleet.Validate, c.Retention.Validate, c.Brief.Validate, c.Store.Validate,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateListeners checks the gRPC and metrics addresses and --pprof.
func (c Config) validateListeners() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q: %w", c.Listen, err)
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			return fmt.Errorf("--metrics-listen %q: %w", c.MetricsListen, err)
		}
	}
	// The profiles ask no credential, and a CPU profile or trace runs as
	// long as its caller asks: only this host may ask.
	if c.Pprof && (c.MetricsListen == "" || !netaddr.IsLoopback(c.MetricsListen)) {
		return fmt.Errorf("--pprof needs --metrics-listen on a loopback address (it is %q): the profiles ask no credential", c.MetricsListen)
	}
	return nil
}

// validateEtcd checks the embedded etcd's settings, or the external one's access.
func (c Config) validateEtcd() error {
	if len(c.EtcdEndpoints) == 0 && c.DataDir == "" {
		return fmt.Errorf("--data-dir is required with the embedded etcd (or give --etcd-endpoints)")
	}
	if len(c.EtcdEndpoints) == 0 && !netaddr.IsLoopback(c.EtcdClient) {
		return fmt.Errorf("--etcd-listen %q is not a loopback address: the embedded etcd listens on this host only (for more, run an external etcd with TLS and give --etcd-endpoints)", c.EtcdClient)
	}
	if len(c.EtcdEndpoints) == 0 && c.Etcd != (store.Access{}) {
		return fmt.Errorf("--etcd-cacert, --etcd-cert, --etcd-key and --etcd-user are for an external etcd: give --etcd-endpoints")
	}
	return c.Etcd.Validate(c.EtcdEndpoints)
}

// validateTimes checks the node lease, heartbeat and loop intervals, and the request and page sizes.
func (c Config) validateTimes() error {
	if c.LeaseTTL < 2*time.Second {
		return fmt.Errorf("lease TTL %s is below etcd's 2s minimum", c.LeaseTTL)
	}
	if c.SeenEvery <= 0 {
		return fmt.Errorf("seen-every %s must be positive", c.SeenEvery)
	}
	if c.Heartbeat <= 0 || c.Heartbeat*2 > c.LeaseTTL {
		return fmt.Errorf("heartbeat %s must be positive and at most half the lease TTL %s", c.Heartbeat, c.LeaseTTL)
	}
	if c.MaxRecvBytes < c.Store.MaxMessageBytes {
		return fmt.Errorf("max receive size %d is below the max message size %d", c.MaxRecvBytes, c.Store.MaxMessageBytes)
	}
	// A page holds at most PageBytes of messages, or one message.
	if reply := max(c.Store.PageBytes, c.Store.MaxMessageBytes) + store.PageSlack; reply > client.MaxReplyBytes {
		return fmt.Errorf("a page of %d bytes (page size %d, max message size %d) would pass the clients' receive limit %d",
			reply, c.Store.PageBytes, c.Store.MaxMessageBytes, client.MaxReplyBytes)
	}
	if c.SessionCount < time.Second {
		return fmt.Errorf("--metrics-session-count %s must be at least 1s", c.SessionCount)
	}
	if c.NodeQueue <= 0 {
		return fmt.Errorf("node queue length must be positive")
	}
	if c.RefusalLog <= 0 {
		return fmt.Errorf("refusal log interval must be positive")
	}
	return nil
}

// validateSecurity checks the bootstrap token, OIDC, TLS and the secrets key.
func (c Config) validateSecurity() error {
	if t := c.Auth.BootstrapToken; t != "" && len(t) < 32 {
		return fmt.Errorf("%s must be at least 32 characters", "CAST_BOOTSTRAP_TOKEN")
	}
	if err := c.Auth.OIDC.Validate(); err != nil {
		return err
	}
	if !c.TLS.Enabled && !c.Insecure {
		return fmt.Errorf("give --tls, or --insecure (env CAST_INSECURE=1) to serve plaintext, where tokens and credentials cross the network in clear; --dev serves plaintext on loopback")
	}
	if c.Publish != nil && !c.TLS.Enabled {
		return fmt.Errorf("--publish-k8s publishes the TLS CA and its pin: drop --insecure")
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	return c.checkSecretsKeyFile()
}

// validateLimits checks the per-principal limits, watches and work tree size.
func (c Config) validateLimits() error {
	for _, r := range []struct {
		role string
		l    authz.Limits
	}{{"user", c.Limits}, {"node", c.NodeLimits}} {
		if err := r.l.Validate(); err != nil {
			return fmt.Errorf("--%s-rate, -burst, -streams, -append-rate, -append-burst: %w", r.role, err)
		}
		if r.l.AppendBurst < c.MaxRecvBytes {
			return fmt.Errorf("--%s-append-burst %d is below the largest request %d: such a request could never pass", r.role, r.l.AppendBurst, c.MaxRecvBytes)
		}
	}
	if err := c.PeerLimits.ValidatePeer(); err != nil {
		return fmt.Errorf("--peer-rate, --peer-burst: %w", err)
	}
	if err := c.Watch.Validate(); err != nil {
		return err
	}
	if c.MaxWorkTreeBytes <= 0 {
		return fmt.Errorf("max work tree size must be positive")
	}
	return nil
}

// DefaultSecretsKeyFile is the secrets key's path outside --dev: beside
// the cast config ($XDG_CONFIG_HOME/cast/secrets.key, else
// ~/.config/cast/secrets.key), apart from the data dir.
func DefaultSecretsKeyFile(getenv func(string) string) string {
	return client.BesideConfig(getenv, SecretsKeyFileName)
}

// SecretsKeyFileName is the secrets key's file name; --dev keeps it in
// the data dir, where earlier versions kept it everywhere.
const SecretsKeyFileName = "secrets.key"

// checkSecretsKeyFile refuses, outside Dev, a key inside the data dir,
// and a key left in the data dir by an earlier version while the
// configured one does not exist yet: a new key would not open what the
// old one sealed.
func (c Config) checkSecretsKeyFile() error {
	if c.Dev || c.DataDir == "" || c.SecretsKey != "" { // the key itself, from the env: no file

		return nil
	}
	if c.SecretsKeyFile != "" {
		inside, err := fsutil.Within(c.SecretsKeyFile, c.DataDir)
		if err != nil {
			return fmt.Errorf("--secrets-key-file %s: %w", c.SecretsKeyFile, err)
		}
		if inside {
			return fmt.Errorf("--secrets-key-file %s is inside --data-dir %s: the key must live apart from the data it seals, so a copy of the data dir does not carry it; move it out (e.g. to %s) and point --secrets-key-file there, or use --dev for a local trial",
				c.SecretsKeyFile, c.DataDir, DefaultSecretsKeyFile(os.Getenv))
		}
	}
	old := filepath.Join(c.DataDir, SecretsKeyFileName)
	if _, err := os.Lstat(old); err != nil {
		return nil
	}
	if c.SecretsKeyFile == "" {
		return fmt.Errorf("%s (from an earlier version) is inside --data-dir: move it out of the data dir and give its new path as --secrets-key-file", old)
	}
	if _, err := os.Lstat(c.SecretsKeyFile); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s (from an earlier version) is inside --data-dir and --secrets-key-file %s does not exist yet: move the old key there (mv %s %s) so what it sealed still opens",
			old, c.SecretsKeyFile, old, c.SecretsKeyFile)
	}
	return nil
}

// validateObjects checks the object store and tiering flags when history
// beyond etcd is on.
func (c Config) validateObjects() error {
	if c.Objects.S3.Endpoint != "" {
		if c.Objects.Folder != "" {
			return fmt.Errorf("--object-store-dir and --s3-endpoint name two object stores; give one")
		}
		if err := c.Objects.S3.Validate(); err != nil {
			return fmt.Errorf("--s3-*: %w", err)
		}
	}
	if c.Objects.S3.Endpoint == "" && c.Objects.Folder == "" {
		return nil
	}
	if err := c.Tier.Validate(c.Store); err != nil {
		return fmt.Errorf("--tier-*: %w", err)
	}
	return nil
}
