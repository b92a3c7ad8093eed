// Command controlplane runs cast's gRPC control plane over etcd (embedded
// by default), or with --dev the whole of cast from one command: the
// control plane and, as its child process, the node binary.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	_ "github.com/cast-dev/cast/internal/agents/codecs" // the agents this binary knows
	"github.com/cast-dev/cast/internal/cmdrun"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/devmode"
	"github.com/cast-dev/cast/internal/failpoint"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/kube"
	"github.com/cast-dev/cast/internal/kubeboot"
	"github.com/cast-dev/cast/internal/logging"
	"github.com/cast-dev/cast/internal/nodebin"
	"github.com/cast-dev/cast/internal/objstore"
	"github.com/cast-dev/cast/internal/store"
)

func main() {
	cfg := controlplane.DefaultConfig()
	var dev, nodeIsolated, nodeFleet, nodeChecks, nodeProbe, publishK8s, nodeAdopt bool
	var devOpts devmode.Options
	var logFormat, logLevel, nodeName, agentsConfig, etcdPasswordFile, nodeMetrics, s3CredsFile, nodeBin string
	var labels []string
	cmd := cmdrun.Daemon(&cobra.Command{
		Use:   "controlplane",
		Short: "Run the cast control plane (--dev: with embedded etcd and a local node, the node binary as its child)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if logFormat == "" {
				logFormat = "json"
				if dev {
					logFormat = "console"
				}
			}
			lg, err := logging.New(logFormat, logLevel)
			if err != nil {
				return err
			}
			defer lg.Sync() //nolint:errcheck
			cfg.Migrate.Failpoint = failpoint.FromEnv(lg)
			if publishK8s {
				if cfg.Publish, err = kubePublisher(lg); err != nil {
					return err
				}
			}
			if etcdPasswordFile != "" {
				if cfg.Etcd.Password, err = store.ReadPassword(etcdPasswordFile); err != nil {
					return err
				}
			}
			// TLS is on unless --insecure (or CAST_INSECURE=1) asks for
			// plaintext; an explicit --tls keeps it on regardless.
			if cfg.Insecure && !cmd.Flags().Changed("tls") {
				cfg.TLS.Enabled = false
			}
			cfg.Web.Plain, cfg.Web.AllowPlain = !cfg.TLS.Enabled, cfg.Insecure
			if devOpts.RotateToken && !dev {
				return fmt.Errorf("--rotate-dev-token rotates the token --dev writes; add --dev")
			}
			if dev && len(cfg.EtcdEndpoints) > 0 {
				return fmt.Errorf("--dev uses the embedded etcd; drop --etcd-endpoints")
			}
			if len(cfg.EtcdEndpoints) == 0 {
				// Before etcd: it would wait on its own lock, deaf to signals.
				lock, err := fsutil.LockDir(cfg.DataDir)
				if err != nil {
					return err
				}
				defer lock.Unlock()
			}
			if err := objectStoreFlags(&cfg, dev, s3CredsFile); err != nil {
				return err
			}
			if !dev {
				if cfg.SecretsKeyFile == "" {
					cfg.SecretsKeyFile = controlplane.DefaultSecretsKeyFile(os.Getenv)
				}
				return controlplane.Run(cmd.Context(), cfg, lg)
			}
			nd := devmode.Node{
				DataDir:       filepath.Join(cfg.DataDir, "node"),
				Name:          nodeName,
				Labels:        labels,
				AgentsConfig:  agentsConfig,
				IsolatedHomes: nodeIsolated,
				FleetAccounts: nodeFleet,
				AgentChecks:   nodeChecks,
				Probe:         nodeProbe,
				Adopt:         nodeAdopt,
				TokenCustody:  cfg.TokenCustody, // --dev --token-custody: the dev node takes part too
				LogFormat:     logFormat,
				LogLevel:      logLevel,
				Env:           nodeEnv(os.Environ()),
			}
			if nd.Name == "" {
				nd.Name, _ = os.Hostname()
			}
			nd.MetricsListen = devmode.NodeMetricsListen(cfg.MetricsListen)
			if cmd.Flags().Changed("node-metrics-listen") {
				nd.MetricsListen = nodeMetrics
			}
			if nd.Bin, err = nodebin.Find(cmd.Context(), nodeBin, filepath.Join(nd.DataDir, "bin"), lg); errors.Is(err, nodebin.ErrNotFound) {
				return fmt.Errorf("--dev runs the node binary as its dev node, and there is %w: build both (go build -o bin/ ./cmd/... or make build), or name it with --node-bin", err)
			} else if err != nil {
				return fmt.Errorf("--dev: %w (or name a node binary with --node-bin)", err)
			}
			if !cmd.Flags().Changed("web-listen") {
				cfg.Web.Listen = devmode.WebListen(cfg.Listen)
			}
			cfg.Web.Plain = true // loopback only (devmode checks): a browser does not trust cast's CA
			cfg.DataDir = filepath.Join(cfg.DataDir, "etcd")
			return devmode.Run(cmd.Context(), cfg, nd, devOpts, lg)
		},
	})
	cmd.AddCommand(bootstrapCommand())
	f := cmd.Flags()
	f.BoolVar(&publishK8s, "publish-k8s", false, "in a Kubernetes pod: keep the ConfigMap cast-ca (the CA bundle) and the Secret cast-node-join (a join token, renewed before it lapses, and the CA pin) current in the pod's namespace, with the pod's service account (docs/install-kubernetes.md)")
	f.BoolVar(&dev, "dev", false, "all of cast from one command, loopback only: embedded etcd and the control plane, and a local node run as a child process of the node binary (see --node-bin)")
	f.StringVar(&nodeBin, "node-bin", "", "--dev: the node binary to run as the local node (default: the node beside this executable; under go run, one built from the working directory's module into DATA_DIR/node/bin; else cast's node on PATH)")
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "gRPC listen address")
	f.StringVar(&cfg.Web.Listen, "web-listen", "", "address of the web timeline (docs/web.md): HTTPS with the gRPC listener's certificate, plain HTTP with --insecure (empty: off); --dev serves plain HTTP on loopback: 127.0.0.1:7780 beside the default --listen, else a free port (logged)")
	cfg.Web.OIDCClientSecret = os.Getenv("CAST_WEB_OIDC_CLIENT_SECRET") // env only: flags show in ps
	f.StringVar(&cfg.Web.PublicURL, "web-url", "", "the web timeline's address as browsers reach it, for the links cast web makes (default: from --web-listen)")
	f.StringVar(&cfg.MetricsListen, "metrics-listen", cfg.MetricsListen, "address for /metrics, /healthz, /readyz: HTTPS with the gRPC listener's certificate (scrapers trust DATA_DIR/ca.pem, server name controlplane.cast.internal), plain HTTP only with --insecure (empty: off)")
	f.BoolVar(&cfg.Pprof, "pprof", false, "also serve Go's /debug/pprof/ (heap, goroutine and CPU profiles) on --metrics-listen, with no credential asked, like /metrics: turn on to diagnose memory or CPU, keep the listener on loopback")
	f.StringVar(&cfg.DataDir, "data-dir", defaultDataDir(), "embedded etcd data (and the dev node's state)")
	f.StringSliceVar(&cfg.EtcdEndpoints, "etcd-endpoints", nil, "external etcd cluster, e.g. http://10.0.0.1:2379 (default: embedded)")
	f.StringVar(&cfg.Etcd.CACert, "etcd-cacert", "", "CA file that verifies the external etcd's server certificate (needs https:// endpoints)")
	f.StringVar(&cfg.Etcd.Cert, "etcd-cert", "", "client certificate for the external etcd's --client-cert-auth (with --etcd-key)")
	f.StringVar(&cfg.Etcd.Key, "etcd-key", "", "key of --etcd-cert (not world-readable)")
	f.StringVar(&cfg.Etcd.User, "etcd-user", "", "etcd user (auth enabled on the external etcd); its password from --etcd-password-file or env CAST_ETCD_PASSWORD")
	f.StringVar(&etcdPasswordFile, "etcd-password-file", "", "file holding the --etcd-user password (0600)")
	cfg.Etcd.Password = os.Getenv("CAST_ETCD_PASSWORD") // env or file only: flags show in ps
	f.StringVar(&cfg.EtcdClient, "etcd-listen", cfg.EtcdClient, "embedded etcd client address (port 0: pick a free one)")
	f.StringVar(&cfg.Objects.Folder, "object-store-dir", "", "folder that history beyond etcd moves to (older messages, idle sessions, large parts; default: none, all history stays in etcd; --dev: DATA_DIR/objects)")
	f.StringVar(&cfg.Objects.S3.Endpoint, "s3-endpoint", "", "an S3-compatible service history beyond etcd moves to instead of a folder, http(s)://host:port (AWS, MinIO, SeaweedFS, ...)")
	f.StringVar(&cfg.Objects.S3.Bucket, "s3-bucket", "cast-history", "the bucket of --s3-endpoint (made if missing)")
	f.StringVar(&cfg.Objects.S3.Region, "s3-region", "us-east-1", "the region of --s3-bucket")
	f.StringVar(&cfg.Objects.S3.Prefix, "s3-prefix", "", "keys are stored under this prefix in the bucket (ends in /)")
	f.StringVar(&s3CredsFile, "s3-credentials-file", "", "file with the S3 access key id and secret on two lines (0600); default: env CAST_S3_ACCESS_KEY_ID and CAST_S3_SECRET_ACCESS_KEY")
	f.Int64Var(&cfg.Tier.HotMessages, "tier-hot-messages", cfg.Tier.HotMessages, "newest messages of each session kept in etcd when an object store is set")
	f.DurationVar(&cfg.Tier.IdleAge, "tier-idle-age", cfg.Tier.IdleAge, "a session without a new message for this long moves to the object store whole")
	f.IntVar(&cfg.Tier.PartBytes, "tier-part-bytes", cfg.Tier.PartBytes, "a message at least this large (image, big tool output) moves to the object store early")
	f.DurationVar(&cfg.Tier.DedupeWindow, "tier-dedupe-window", cfg.Tier.DedupeWindow, "a moved message's client id record leaves etcd this long after the message was appended: a retry with its client id within it gets the stored message back, one after it is a new message")
	f.Var(&cfg.Retention.Policy, "retain", "purge sessions idle longer than their creator's window, e.g. 'user:alice=90d,user:*=365d,node:*=forever' (PRINCIPAL is ROLE:NAME, ROLE:* or *; the most specific rule applies; AGE in days, a duration of at least 24h, or forever); sessions no rule covers are never purged (default: none)")
	f.DurationVar(&cfg.Retention.Every, "retain-every", cfg.Retention.Every, "how often --retain is applied")
	f.BoolVar(&cfg.Retention.DryRun, "retain-dry-run", false, "apply --retain as a dry run: log each session it would purge and count them (cast_retention_would_purge_sessions), purging none")
	f.Int64Var(&cfg.Store.QuotaBytes, "store-quota-bytes", cfg.Store.QuotaBytes, "refuse writes near this etcd size (keep equal to etcd's --quota-backend-bytes)")
	f.DurationVar(&cfg.LeaseTTL, "node-lease-ttl", cfg.LeaseTTL, "a node silent this long is marked down")
	f.DurationVar(&cfg.SessionCount, "metrics-session-count", cfg.SessionCount, "how often cast_sessions (sessions by agent and state) is recounted from the store")
	f.DurationVar(&cfg.Heartbeat, "node-heartbeat", cfg.Heartbeat, "heartbeat interval nodes are told to use")
	f.StringVar(&cfg.ReplicaID, "replica-id", "", "name of this replica (default: host-pid)")
	f.BoolVar(&devOpts.RotateToken, "rotate-dev-token", false, "--dev: make a new admin token for the dev context in ~/.config/cast/config.yaml, revoking the one there (by default a restart keeps it while it is valid, so running casts carry on)")
	f.StringVar(&nodeName, "node-name", "", "--dev: the local node's name (default: hostname)")
	f.StringVar(&nodeMetrics, "node-metrics-listen", "", "--dev: the local node's /metrics, /healthz and /readyz address (node --metrics-listen; default: --metrics-listen's host and next port, 127.0.0.1:7779; empty: off)")
	f.StringArrayVar(&labels, "node-label", nil, "--dev: a label of the local node, repeatable")
	f.BoolVar(&nodeIsolated, "node-isolated-homes", false, "--dev: the local node runs agents with their own HOME under DATA_DIR/node/agents instead of your own login (node --isolated-homes)")
	f.BoolVar(&nodeChecks, "node-agent-checks", os.Getenv("CAST_AGENT_CHECKS") != "off", "--dev: the local node canaries its agent CLIs (node --agent-checks)")
	f.BoolVar(&nodeAdopt, "node-adopt", os.Getenv("CAST_ADOPT") != "off", "--dev: the local node keeps the sessions in your agents' own folders, including those you run in the agents directly, as cast sessions (node --adopt; env CAST_ADOPT=off turns the default off)")
	f.BoolVar(&nodeProbe, "node-probe", false, "--dev: READY of the local node's agents from running each CLI once, not from its login files (node --probe)")
	f.BoolVar(&nodeFleet, "node-fleet-accounts", false, "--dev: fleet accounts may rewrite your agents' credential stores, keeping backups (node --fleet-accounts)")
	f.StringVar(&agentsConfig, "node-agents-config", "", "--dev: the local node's per-agent {bin, home, env, args} JSON (0600; see node --agents-config)")
	f.StringVar(&cfg.Brief.Endpoint, "brief-endpoint", os.Getenv("CAST_BRIEF_ENDPOINT"), "model endpoint for handoff briefs (env CAST_BRIEF_ENDPOINT; empty: fallback briefs)")
	f.StringVar(&cfg.Brief.Model, "brief-model", cmdrun.EnvOr("CAST_BRIEF_MODEL", "claude-haiku-4-5"), "model for handoff briefs (env CAST_BRIEF_MODEL)")
	f.StringVar(&cfg.Brief.Provider, "brief-provider", cmdrun.EnvOr("CAST_BRIEF_PROVIDER", "anthropic"), "anthropic or openai (an OpenAI-compatible endpoint)")
	cfg.Brief.APIKey = os.Getenv("CAST_BRIEF_API_KEY") // env only: flags show in ps
	f.BoolVar(&cfg.TLS.Enabled, "tls", true, "serve TLS from the control plane's own CA (made on first start, its key sealed) or --ca-cert; clients trust DATA_DIR/ca.pem or the logged pin; on unless --insecure")
	f.BoolVar(&cfg.Insecure, "insecure", os.Getenv("CAST_INSECURE") == "1", "serve plaintext gRPC and plain HTTP metrics instead of TLS (env CAST_INSECURE=1): tokens and credentials cross the network in clear; warned at every start")
	f.StringVar(&cfg.TLS.CACertFile, "ca-cert", "", "an operator's CA certificate (PEM, e.g. an intermediate of your PKI) to sign the server and client certificates instead of the generated CA; give every replica the same one")
	f.StringVar(&cfg.TLS.CAKeyFile, "ca-key", "", "the private key of --ca-cert (PEM; mode 0600, refused if others can read it)")
	f.BoolVar(&cfg.TLS.CAReplace, "ca-replace", false, "let this start replace the store's TLS CA by another (generated to --ca-cert, or back): every joined node must join again with the new pin")
	f.StringArrayVar(&cfg.TLS.Hosts, "tls-san", nil, "an extra name or IP for the server certificate, repeatable")
	f.DurationVar(&cfg.TLS.NodeCertTTL, "node-cert-ttl", cfg.TLS.NodeCertTTL, "lifetime of a node's client certificate (TLS); nodes renew theirs at two thirds of it")
	f.DurationVar(&cfg.TLS.UserCertTTL, "user-cert-ttl", cfg.TLS.UserCertTTL, "lifetime of a user's client certificate (cast token cert)")
	f.Float64Var(&cfg.Limits.Rate, "user-rate", cfg.Limits.Rate, "requests per second one user token may send (admins are not limited; nodes have --node-rate)")
	f.IntVar(&cfg.Limits.Burst, "user-burst", cfg.Limits.Burst, "requests one user may send at once above --user-rate")
	f.IntVar(&cfg.Limits.Streams, "user-streams", cfg.Limits.Streams, "watch and export streams one user may hold open")
	f.IntVar(&cfg.Watch.MaxPerPrincipal, "max-watches", cfg.Watch.MaxPerPrincipal, "session watches (cast watch, UIs) one principal, admins included, may hold open on a replica")
	f.IntVar(&cfg.Watch.Buffer, "watch-buffer", cfg.Watch.Buffer, "live events queued per session watch; a watch further behind catches up from the store")
	f.Float64Var(&cfg.Limits.AppendBytes, "user-append-rate", cfg.Limits.AppendBytes, "bytes per second one user may append (messages, imports)")
	f.IntVar(&cfg.Limits.AppendBurst, "user-append-burst", cfg.Limits.AppendBurst, "bytes one user may append at once above --user-append-rate (at least the largest request)")
	f.Float64Var(&cfg.NodeLimits.Rate, "node-rate", cfg.NodeLimits.Rate, "requests per second one node may send")
	f.IntVar(&cfg.NodeLimits.Burst, "node-burst", cfg.NodeLimits.Burst, "requests one node may send at once above --node-rate")
	f.Float64Var(&cfg.PeerLimits.Rate, "peer-rate", cfg.PeerLimits.Rate, "calls per second one address may make without a credential (joins, CA bundle, version), and apart, with a credential that names no one")
	f.IntVar(&cfg.PeerLimits.Burst, "peer-burst", cfg.PeerLimits.Burst, "calls one address may make at once above --peer-rate")
	f.IntVar(&cfg.NodeLimits.Streams, "node-streams", cfg.NodeLimits.Streams, "streams one node may hold open (its connection, work tree transfers, watches)")
	f.Float64Var(&cfg.NodeLimits.AppendBytes, "node-append-rate", cfg.NodeLimits.AppendBytes, "bytes per second one node may append (the turns it runs)")
	f.IntVar(&cfg.NodeLimits.AppendBurst, "node-append-burst", cfg.NodeLimits.AppendBurst, "bytes one node may append at once above --node-append-rate (at least the largest request)")
	f.StringVar(&cfg.Auth.AdminTokenFile, "admin-token-file", "", "where the first admin token is written on the store's first start (0600; default: DATA_DIR/admin.token)")
	cfg.Auth.BootstrapToken = os.Getenv(controlplane.BootstrapTokenEnv) // env only: flags show in ps
	f.StringVar(&cfg.Auth.OIDC.Issuer, "oidc-issuer", "", "accept OIDC ID tokens from this issuer as user credentials (https; its discovery document and keys are fetched from there)")
	f.StringVar(&cfg.Auth.OIDC.ClientID, "oidc-client-id", "", "the client id ID tokens must be issued for (their audience); needed with --oidc-issuer")
	f.StringVar(&cfg.Auth.OIDC.UsernameClaim, "oidc-username-claim", cfg.Auth.OIDC.UsernameClaim, "the ID token claim that names the user (user:<claim>)")
	f.StringVar(&cfg.Auth.OIDC.GroupsClaim, "oidc-groups-claim", cfg.Auth.OIDC.GroupsClaim, "the ID token claim that lists the user's groups")
	f.StringVar(&cfg.Auth.OIDC.AdminGroup, "oidc-admin-group", "", "members of this group (in --oidc-groups-claim) are admins; everyone else is a user")
	cfg.SecretsKey = os.Getenv(controlplane.SecretsKeyEnv)
	f.StringVar(&cfg.SecretsKeyFile, "secrets-key-file", "", "key fleet account credentials and the TLS CA key are sealed with (hex, 0600, created on first start; env CAST_SECRETS_KEY gives the key itself; never inside --data-dir; default: $XDG_CONFIG_HOME/cast/secrets.key, ~/.config/cast/secrets.key; --dev: in DATA_DIR/etcd)")
	f.StringVar(&cfg.Fleet.Policy, "account-policy", cfg.Fleet.Policy, "what a usage limit does: ask (park and ask: cast account approve|deny|use), auto (switch to the account with most room), resume (wait for the reset) or off")
	f.DurationVar(&cfg.Fleet.Cooldown, "account-cooldown", cfg.Fleet.Cooldown, "how long a fleet account counts as limited after a usage limit")
	f.Float64Var(&cfg.Fleet.TurnReserve, "account-turn-reserve", cfg.Fleet.TurnReserve, "percent of each usage window the ledger reserves per running fleet turn (0 turns the ledger off)")
	f.BoolVar(&cfg.Fleet.MetricsAccountNames, "metrics-account-names", false, "label the fleet usage gauges with account names (else \"active\" and \"best\")")
	f.DurationVar(&cfg.Fleet.Sweep, "account-sweep", cfg.Fleet.Sweep, "how often limited fleet accounts are checked for a reset")
	f.BoolVar(&cfg.TokenCustody, "token-custody", cfg.TokenCustody, "keep each fleet login's refresh token on one custodian node (nodes with --token-custody, the default, and the --dev node get the access token only; docs/token-custody.md); --token-custody=false: nodes copy the stored login file")
	f.StringVar(&logFormat, "log-format", "", "json or console (default: console with --dev, else json)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmdrun.Execute(cmd)
}

// objectStoreFlags completes the object store's config: --dev's default
// folder, and the S3 credentials from their file or the environment.
func objectStoreFlags(cfg *controlplane.Config, dev bool, credsFile string) error {
	if cfg.Objects.S3.Endpoint != "" {
		creds, err := objstore.LoadCreds(credsFile)
		if err != nil {
			return err
		}
		cfg.Objects.S3.Creds = creds
		return nil
	}
	if credsFile != "" {
		return fmt.Errorf("--s3-credentials-file needs --s3-endpoint")
	}
	if dev && cfg.Objects.Folder == "" {
		cfg.Objects.Folder = filepath.Join(cfg.DataDir, "objects")
	}
	return nil
}

// kubePublisher is --publish-k8s's publisher, with the pod's service
// account.
func kubePublisher(lg *zap.Logger) (*kubeboot.Publisher, error) {
	kc, err := kube.InCluster()
	if err != nil {
		return nil, fmt.Errorf("--publish-k8s: %w", err)
	}
	api, err := kube.New(kc)
	if err != nil {
		return nil, fmt.Errorf("--publish-k8s: %w", err)
	}
	return kubeboot.NewPublisher(api, kubeboot.DefaultPublishConfig(), lg)
}

// bootstrapCommand is `controlplane k8s-bootstrap`, the Job cast-bootstrap
// of deploy/k8s: it creates the Secrets the control plane (and etcd)
// start from, those missing only.
func bootstrapCommand() *cobra.Command {
	boot := kubeboot.DefaultBootstrapConfig()
	cmd := &cobra.Command{
		Use:   "k8s-bootstrap",
		Short: "In a Kubernetes Job: create the Secrets cast-controlplane (admin token, secrets key) and, with --etcd-tls, cast-etcd-tls, unless they exist",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lg, err := logging.New("json", "info")
			if err != nil {
				return err
			}
			defer lg.Sync() //nolint:errcheck
			kc, err := kube.InCluster()
			if err != nil {
				return err
			}
			api, err := kube.New(kc)
			if err != nil {
				return err
			}
			return kubeboot.Bootstrap(cmd.Context(), api, boot, lg)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&boot.EtcdTLS, "etcd-tls", false, "also make cast-etcd-tls: an etcd CA, the members' certificate and the control plane's client certificate")
	f.StringVar(&boot.EtcdService, "etcd-service", boot.EtcdService, "the etcd StatefulSet's name (and its headless Service's): members are NAME-0.NAME ...")
	f.IntVar(&boot.EtcdMembers, "etcd-members", boot.EtcdMembers, "etcd's replicas: each member's name goes in the certificate")
	f.StringVar(&boot.ClusterDomain, "cluster-domain", boot.ClusterDomain, "the cluster's DNS domain, for the members' qualified names")
	return cmd
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "cast", "controlplane")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "cast", "controlplane")
}

// secretEnv are the control plane's own secrets in its environment: the
// dev node does not get them, since it hands its environment to the agent
// CLIs it runs.
var secretEnv = []string{controlplane.SecretsKeyEnv, controlplane.BootstrapTokenEnv, "CAST_ETCD_PASSWORD",
	"CAST_BRIEF_API_KEY", "CAST_WEB_OIDC_CLIENT_SECRET", objstore.EnvAccessKeyID, objstore.EnvSecretAccessKey}

// nodeEnv is env less secretEnv.
func nodeEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(secretEnv, k) {
			out = append(out, kv)
		}
	}
	return out
}
