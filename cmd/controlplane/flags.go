package main

import (
	"os"

	"github.com/spf13/pflag"

	"github.com/cast-dev/cast/internal/cmdrun"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/devmode"
)

// options are the control plane's flags: its config, and what --dev and
// the start-up around it take.
type options struct {
	cfg                                                                        controlplane.Config
	dev, nodeIsolated, nodeFleet, nodeChecks, nodeProbe, publishK8s, nodeAdopt bool
	devOpts                                                                    devmode.Options
	logFormat, logLevel, nodeName, agentsConfig                                string
	etcdPasswordFile, nodeMetrics, s3CredsFile, nodeBin                        string
	labels                                                                     []string
}

// format is --log-format: console with --dev, else json, unless given.
func (o *options) format() string {
	switch {
	case o.logFormat != "":
		return o.logFormat
	case o.dev:
		return "console"
	}
	return "json"
}

// addFlags registers every flag of the command on f, and reads the
// secrets that come from the environment only.
func addFlags(f *pflag.FlagSet, o *options) {
	serveFlags(f, o)
	storeFlags(f, o)
	devFlags(f, o)
	securityFlags(f, o)
	limitFlags(f, o)
	fleetFlags(f, o)
	secretsFromEnv(&o.cfg)
}

// secretsFromEnv reads the secrets that have no flag: flags show in ps.
func secretsFromEnv(cfg *controlplane.Config) {
	cfg.Web.OIDCClientSecret = os.Getenv("CAST_WEB_OIDC_CLIENT_SECRET")
	cfg.Etcd.Password = os.Getenv("CAST_ETCD_PASSWORD")
	cfg.Brief.APIKey = os.Getenv("CAST_BRIEF_API_KEY")
	cfg.Auth.BootstrapToken = os.Getenv(controlplane.BootstrapTokenEnv)
	cfg.SecretsKey = os.Getenv(controlplane.SecretsKeyEnv)
}

// serveFlags registers the flags of where and how the control plane serves, and what it tells nodes.
func serveFlags(f *pflag.FlagSet, o *options) {
	f.StringVar(&o.cfg.Listen, "listen", o.cfg.Listen, "gRPC listen address")
	f.StringVar(&o.cfg.Web.Listen, "web-listen", "", "address of the web timeline (docs/web.md): HTTPS with the gRPC listener's certificate, plain HTTP with --insecure (empty: off); --dev serves plain HTTP on loopback: 127.0.0.1:7780 beside the default --listen, else a free port (logged)")
	f.StringVar(&o.cfg.Web.PublicURL, "web-url", "", "the web timeline's address as browsers reach it, for the links cast web makes (default: from --web-listen)")
	f.StringVar(&o.cfg.MetricsListen, "metrics-listen", o.cfg.MetricsListen, "address for /metrics, /healthz, /readyz: HTTPS with the gRPC listener's certificate (scrapers trust DATA_DIR/ca.pem, server name controlplane.cast.internal), plain HTTP only with --insecure (empty: off)")
	f.BoolVar(&o.cfg.Pprof, "pprof", false, "also serve Go's /debug/pprof/ (heap, goroutine and CPU profiles) on --metrics-listen, with no credential asked, like /metrics: turn on to diagnose memory or CPU, keep the listener on loopback")
	f.StringVar(&o.cfg.ReplicaID, "replica-id", "", "name of this replica (default: host-pid)")
	f.BoolVar(&o.publishK8s, "publish-k8s", false, "in a Kubernetes pod: keep the ConfigMap cast-ca (the CA bundle) and the Secret cast-node-join (a join token, renewed before it lapses, and the CA pin) current in the pod's namespace, with the pod's service account (docs/install-kubernetes.md)")
	f.DurationVar(&o.cfg.LeaseTTL, "node-lease-ttl", o.cfg.LeaseTTL, "a node silent this long is marked down")
	f.DurationVar(&o.cfg.SessionCount, "metrics-session-count", o.cfg.SessionCount, "how often cast_sessions (sessions by agent and state) is recounted from the store")
	f.DurationVar(&o.cfg.Heartbeat, "node-heartbeat", o.cfg.Heartbeat, "heartbeat interval nodes are told to use")
	f.StringVar(&o.cfg.Brief.Endpoint, "brief-endpoint", os.Getenv("CAST_BRIEF_ENDPOINT"), "model endpoint for handoff briefs (env CAST_BRIEF_ENDPOINT; empty: fallback briefs)")
	f.StringVar(&o.cfg.Brief.Model, "brief-model", cmdrun.EnvOr("CAST_BRIEF_MODEL", "claude-haiku-4-5"), "model for handoff briefs (env CAST_BRIEF_MODEL)")
	f.StringVar(&o.cfg.Brief.Provider, "brief-provider", cmdrun.EnvOr("CAST_BRIEF_PROVIDER", "anthropic"), "anthropic or openai (an OpenAI-compatible endpoint)")
	f.StringVar(&o.logFormat, "log-format", "", "json or console (default: console with --dev, else json)")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
}

// storeFlags registers the flags of etcd, the object store, tiering and retention.
func storeFlags(f *pflag.FlagSet, o *options) {
	f.StringVar(&o.cfg.DataDir, "data-dir", defaultDataDir(), "embedded etcd data (and the dev node's state)")
	f.StringSliceVar(&o.cfg.EtcdEndpoints, "etcd-endpoints", nil, "external etcd cluster, e.g. http://10.0.0.1:2379 (default: embedded)")
	f.StringVar(&o.cfg.Etcd.CACert, "etcd-cacert", "", "CA file that verifies the external etcd's server certificate (needs https:// endpoints)")
	f.StringVar(&o.cfg.Etcd.Cert, "etcd-cert", "", "client certificate for the external etcd's --client-cert-auth (with --etcd-key)")
	f.StringVar(&o.cfg.Etcd.Key, "etcd-key", "", "key of --etcd-cert (not world-readable)")
	f.StringVar(&o.cfg.Etcd.User, "etcd-user", "", "etcd user (auth enabled on the external etcd); its password from --etcd-password-file or env CAST_ETCD_PASSWORD")
	f.StringVar(&o.etcdPasswordFile, "etcd-password-file", "", "file holding the --etcd-user password (0600)")
	f.StringVar(&o.cfg.EtcdClient, "etcd-listen", o.cfg.EtcdClient, "embedded etcd client address (port 0: pick a free one)")
	f.StringVar(&o.cfg.Objects.Folder, "object-store-dir", "", "folder that history beyond etcd moves to (older messages, idle sessions, large parts; default: none, all history stays in etcd; --dev: DATA_DIR/objects)")
	f.StringVar(&o.cfg.Objects.S3.Endpoint, "s3-endpoint", "", "an S3-compatible service history beyond etcd moves to instead of a folder, http(s)://host:port (AWS, MinIO, SeaweedFS, ...)")
	f.StringVar(&o.cfg.Objects.S3.Bucket, "s3-bucket", "cast-history", "the bucket of --s3-endpoint (made if missing)")
	f.StringVar(&o.cfg.Objects.S3.Region, "s3-region", "us-east-1", "the region of --s3-bucket")
	f.StringVar(&o.cfg.Objects.S3.Prefix, "s3-prefix", "", "keys are stored under this prefix in the bucket (ends in /)")
	f.StringVar(&o.s3CredsFile, "s3-credentials-file", "", "file with the S3 access key id and secret on two lines (0600); default: env CAST_S3_ACCESS_KEY_ID and CAST_S3_SECRET_ACCESS_KEY")
	f.Int64Var(&o.cfg.Tier.HotMessages, "tier-hot-messages", o.cfg.Tier.HotMessages, "newest messages of each session kept in etcd when an object store is set")
	f.DurationVar(&o.cfg.Tier.IdleAge, "tier-idle-age", o.cfg.Tier.IdleAge, "a session without a new message for this long moves to the object store whole")
	f.IntVar(&o.cfg.Tier.PartBytes, "tier-part-bytes", o.cfg.Tier.PartBytes, "a message at least this large (image, big tool output) moves to the object store early")
	f.DurationVar(&o.cfg.Tier.DedupeWindow, "tier-dedupe-window", o.cfg.Tier.DedupeWindow, "a moved message's client id record leaves etcd this long after the message was appended: a retry with its client id within it gets the stored message back, one after it is a new message")
	f.Var(&o.cfg.Retention.Policy, "retain", "purge sessions idle longer than their creator's window, e.g. 'user:alice=90d,user:*=365d,node:*=forever' (PRINCIPAL is ROLE:NAME, ROLE:* or *; the most specific rule applies; AGE in days, a duration of at least 24h, or forever); sessions no rule covers are never purged (default: none)")
	f.DurationVar(&o.cfg.Retention.Every, "retain-every", o.cfg.Retention.Every, "how often --retain is applied")
	f.BoolVar(&o.cfg.Retention.DryRun, "retain-dry-run", false, "apply --retain as a dry run: log each session it would purge and count them (cast_retention_would_purge_sessions), purging none")
	f.Int64Var(&o.cfg.Store.QuotaBytes, "store-quota-bytes", o.cfg.Store.QuotaBytes, "refuse writes near this etcd size (keep equal to etcd's --quota-backend-bytes)")
}

// devFlags registers the flags of --dev and its local node.
func devFlags(f *pflag.FlagSet, o *options) {
	f.BoolVar(&o.dev, "dev", false, "all of cast from one command, loopback only: embedded etcd and the control plane, and a local node run as a child process of the node binary (see --node-bin)")
	f.StringVar(&o.nodeBin, "node-bin", "", "--dev: the node binary to run as the local node (default: the node beside this executable; under go run, one built from the working directory's module into DATA_DIR/node/bin; else cast's node on PATH)")
	f.BoolVar(&o.devOpts.RotateToken, "rotate-dev-token", false, "--dev: make a new admin token for the dev context in ~/.config/cast/config.yaml, revoking the one there (by default a restart keeps it while it is valid, so running casts carry on)")
	f.StringVar(&o.nodeName, "node-name", "", "--dev: the local node's name (default: hostname)")
	f.StringVar(&o.nodeMetrics, "node-metrics-listen", "", "--dev: the local node's /metrics, /healthz and /readyz address (node --metrics-listen; default: --metrics-listen's host and next port, 127.0.0.1:7779; empty: off)")
	f.StringArrayVar(&o.labels, "node-label", nil, "--dev: a label of the local node, repeatable")
	f.BoolVar(&o.nodeIsolated, "node-isolated-homes", false, "--dev: the local node runs agents with their own HOME under DATA_DIR/node/agents instead of your own login (node --isolated-homes)")
	f.BoolVar(&o.nodeChecks, "node-agent-checks", os.Getenv("CAST_AGENT_CHECKS") != "off", "--dev: the local node canaries its agent CLIs (node --agent-checks)")
	f.BoolVar(&o.nodeAdopt, "node-adopt", os.Getenv("CAST_ADOPT") != "off", "--dev: the local node keeps the sessions in your agents' own folders, including those you run in the agents directly, as cast sessions (node --adopt; env CAST_ADOPT=off turns the default off)")
	f.BoolVar(&o.nodeProbe, "node-probe", false, "--dev: READY of the local node's agents from running each CLI once, not from its login files (node --probe)")
	f.BoolVar(&o.nodeFleet, "node-fleet-accounts", false, "--dev: fleet accounts may rewrite your agents' credential stores, keeping backups (node --fleet-accounts)")
	f.StringVar(&o.agentsConfig, "node-agents-config", "", "--dev: the local node's per-agent {bin, home, env, args} JSON (0600; see node --agents-config)")
}

// securityFlags registers the flags of TLS, the CA, credentials and the secrets key.
func securityFlags(f *pflag.FlagSet, o *options) {
	f.BoolVar(&o.cfg.TLS.Enabled, "tls", true, "serve TLS from the control plane's own CA (made on first start, its key sealed) or --ca-cert; clients trust DATA_DIR/ca.pem or the logged pin; on unless --insecure")
	f.BoolVar(&o.cfg.Insecure, "insecure", os.Getenv("CAST_INSECURE") == "1", "serve plaintext gRPC and plain HTTP metrics instead of TLS (env CAST_INSECURE=1): tokens and credentials cross the network in clear; warned at every start")
	f.StringVar(&o.cfg.TLS.CACertFile, "ca-cert", "", "an operator's CA certificate (PEM, e.g. an intermediate of your PKI) to sign the server and client certificates instead of the generated CA; give every replica the same one")
	f.StringVar(&o.cfg.TLS.CAKeyFile, "ca-key", "", "the private key of --ca-cert (PEM; mode 0600, refused if others can read it)")
	f.BoolVar(&o.cfg.TLS.CAReplace, "ca-replace", false, "let this start replace the store's TLS CA by another (generated to --ca-cert, or back): every joined node must join again with the new pin")
	f.StringArrayVar(&o.cfg.TLS.Hosts, "tls-san", nil, "an extra name or IP for the server certificate, repeatable")
	f.DurationVar(&o.cfg.TLS.NodeCertTTL, "node-cert-ttl", o.cfg.TLS.NodeCertTTL, "lifetime of a node's client certificate (TLS); nodes renew theirs at two thirds of it")
	f.DurationVar(&o.cfg.TLS.UserCertTTL, "user-cert-ttl", o.cfg.TLS.UserCertTTL, "lifetime of a user's client certificate (cast token cert)")
	f.StringVar(&o.cfg.Auth.AdminTokenFile, "admin-token-file", "", "where the first admin token is written on the store's first start (0600; default: DATA_DIR/admin.token)")
	f.StringVar(&o.cfg.Auth.OIDC.Issuer, "oidc-issuer", "", "accept OIDC ID tokens from this issuer as user credentials (https; its discovery document and keys are fetched from there)")
	f.StringVar(&o.cfg.Auth.OIDC.ClientID, "oidc-client-id", "", "the client id ID tokens must be issued for (their audience); needed with --oidc-issuer")
	f.StringVar(&o.cfg.Auth.OIDC.UsernameClaim, "oidc-username-claim", o.cfg.Auth.OIDC.UsernameClaim, "the ID token claim that names the user (user:<claim>)")
	f.StringVar(&o.cfg.Auth.OIDC.GroupsClaim, "oidc-groups-claim", o.cfg.Auth.OIDC.GroupsClaim, "the ID token claim that lists the user's groups")
	f.StringVar(&o.cfg.Auth.OIDC.AdminGroup, "oidc-admin-group", "", "members of this group (in --oidc-groups-claim) are admins; everyone else is a user")
	f.StringVar(&o.cfg.SecretsKeyFile, "secrets-key-file", "", "key fleet account credentials and the TLS CA key are sealed with (hex, 0600, created on first start; env CAST_SECRETS_KEY gives the key itself; never inside --data-dir; default: $XDG_CONFIG_HOME/cast/secrets.key, ~/.config/cast/secrets.key; --dev: in DATA_DIR/etcd)")
}

// limitFlags registers the flags of per-principal rates, bursts and streams.
func limitFlags(f *pflag.FlagSet, o *options) {
	f.Float64Var(&o.cfg.Limits.Rate, "user-rate", o.cfg.Limits.Rate, "requests per second one user token may send (admins are not limited; nodes have --node-rate)")
	f.IntVar(&o.cfg.Limits.Burst, "user-burst", o.cfg.Limits.Burst, "requests one user may send at once above --user-rate")
	f.IntVar(&o.cfg.Limits.Streams, "user-streams", o.cfg.Limits.Streams, "watch and export streams one user may hold open")
	f.IntVar(&o.cfg.Watch.MaxPerPrincipal, "max-watches", o.cfg.Watch.MaxPerPrincipal, "session watches (cast watch, UIs) one principal, admins included, may hold open on a replica")
	f.IntVar(&o.cfg.Watch.Buffer, "watch-buffer", o.cfg.Watch.Buffer, "live events queued per session watch; a watch further behind catches up from the store")
	f.Float64Var(&o.cfg.Limits.AppendBytes, "user-append-rate", o.cfg.Limits.AppendBytes, "bytes per second one user may append (messages, imports)")
	f.IntVar(&o.cfg.Limits.AppendBurst, "user-append-burst", o.cfg.Limits.AppendBurst, "bytes one user may append at once above --user-append-rate (at least the largest request)")
	f.Float64Var(&o.cfg.NodeLimits.Rate, "node-rate", o.cfg.NodeLimits.Rate, "requests per second one node may send")
	f.IntVar(&o.cfg.NodeLimits.Burst, "node-burst", o.cfg.NodeLimits.Burst, "requests one node may send at once above --node-rate")
	f.Float64Var(&o.cfg.PeerLimits.Rate, "peer-rate", o.cfg.PeerLimits.Rate, "calls per second one address may make without a credential (joins, CA bundle, version), and apart, with a credential that names no one")
	f.IntVar(&o.cfg.PeerLimits.Burst, "peer-burst", o.cfg.PeerLimits.Burst, "calls one address may make at once above --peer-rate")
	f.IntVar(&o.cfg.NodeLimits.Streams, "node-streams", o.cfg.NodeLimits.Streams, "streams one node may hold open (its connection, work tree transfers, watches)")
	f.Float64Var(&o.cfg.NodeLimits.AppendBytes, "node-append-rate", o.cfg.NodeLimits.AppendBytes, "bytes per second one node may append (the turns it runs)")
	f.IntVar(&o.cfg.NodeLimits.AppendBurst, "node-append-burst", o.cfg.NodeLimits.AppendBurst, "bytes one node may append at once above --node-append-rate (at least the largest request)")
}

// fleetFlags registers the flags of fleet accounts and token custody.
func fleetFlags(f *pflag.FlagSet, o *options) {
	f.StringVar(&o.cfg.Fleet.Policy, "account-policy", o.cfg.Fleet.Policy, "what a usage limit does: ask (park and ask: cast account approve|deny|use), auto (switch to the account with most room), resume (wait for the reset) or off")
	f.DurationVar(&o.cfg.Fleet.Cooldown, "account-cooldown", o.cfg.Fleet.Cooldown, "how long a fleet account counts as limited after a usage limit")
	f.Float64Var(&o.cfg.Fleet.TurnReserve, "account-turn-reserve", o.cfg.Fleet.TurnReserve, "percent of each usage window the ledger reserves per running fleet turn (0 turns the ledger off)")
	f.BoolVar(&o.cfg.Fleet.MetricsAccountNames, "metrics-account-names", false, "label the fleet usage gauges with account names (else \"active\" and \"best\")")
	f.DurationVar(&o.cfg.Fleet.Sweep, "account-sweep", o.cfg.Fleet.Sweep, "how often limited fleet accounts are checked for a reset")
	f.BoolVar(&o.cfg.TokenCustody, "token-custody", o.cfg.TokenCustody, "keep each fleet login's refresh token on one custodian node (nodes with --token-custody, the default, and the --dev node get the access token only; docs/token-custody.md); --token-custody=false: nodes copy the stored login file")
}
