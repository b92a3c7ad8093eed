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
	"github.com/cast-dev/cast/internal/nodebin"
	"github.com/cast-dev/cast/internal/objstore"
	"github.com/cast-dev/cast/internal/store"
)

func main() {
	o := options{cfg: controlplane.DefaultConfig()}
	cmd := cmdrun.Daemon(&cobra.Command{
		Use:   "controlplane",
		Short: "Run the cast control plane (--dev: with embedded etcd and a local node, the node binary as its child)",
		RunE:  cmdrun.Logged(o.format, func() string { return o.logLevel }, func(cmd *cobra.Command, lg *zap.Logger) error { return run(cmd, &o, lg) }),
	})
	cmd.AddCommand(bootstrapCommand())
	addFlags(cmd.Flags(), &o)
	cmdrun.Execute(cmd)
}

// run completes the config from the flags and runs the control plane, or
// with --dev all of cast.
func run(cmd *cobra.Command, o *options, lg *zap.Logger) error {
	cfg := &o.cfg
	var err error
	// One hook for every point: a stopping point stops once.
	fp := failpoint.FromEnv(lg)
	cfg.Migrate.Failpoint, cfg.Failpoint = fp, fp
	if o.publishK8s {
		if cfg.Publish, err = kubePublisher(lg); err != nil {
			return err
		}
	}
	if o.etcdPasswordFile != "" {
		if cfg.Etcd.Password, err = store.ReadPassword(o.etcdPasswordFile); err != nil {
			return err
		}
	}
	// TLS is on unless --insecure (or CAST_INSECURE=1) asks for
	// plaintext; an explicit --tls keeps it on regardless.
	if cfg.Insecure && !cmd.Flags().Changed("tls") {
		cfg.TLS.Enabled = false
	}
	cfg.Web.Plain, cfg.Web.AllowPlain = !cfg.TLS.Enabled, cfg.Insecure
	if o.devOpts.RotateToken && !o.dev {
		return fmt.Errorf("--rotate-dev-token rotates the token --dev writes; add --dev")
	}
	if o.dev && len(cfg.EtcdEndpoints) > 0 {
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
	if err := objectStoreFlags(cfg, o.dev, o.s3CredsFile); err != nil {
		return err
	}
	if !o.dev {
		if cfg.SecretsKeyFile == "" {
			cfg.SecretsKeyFile = controlplane.DefaultSecretsKeyFile(os.Getenv)
		}
		return controlplane.Run(cmd.Context(), *cfg, lg)
	}
	return runDev(cmd, o, lg)
}

// runDev runs all of cast from one command: the control plane on the
// embedded etcd and the node binary as its child.
func runDev(cmd *cobra.Command, o *options, lg *zap.Logger) error {
	cfg := o.cfg
	nd, err := devNode(cmd, o, lg)
	if err != nil {
		return err
	}
	if !cmd.Flags().Changed("web-listen") {
		cfg.Web.Listen = devmode.WebListen(cfg.Listen)
	}
	cfg.Web.Plain = true // loopback only (devmode checks): a browser does not trust cast's CA
	opts := o.devOpts
	opts.DataDir = cfg.DataDir
	cfg.DataDir = filepath.Join(cfg.DataDir, "etcd")
	return devmode.Run(cmd.Context(), cfg, nd, opts, lg)
}

// devNode is --dev's local node, from the --node-* flags.
func devNode(cmd *cobra.Command, o *options, lg *zap.Logger) (devmode.Node, error) {
	nd := devmode.Node{
		DataDir:       filepath.Join(o.cfg.DataDir, "node"),
		Name:          o.nodeName,
		Labels:        o.labels,
		AgentsConfig:  o.agentsConfig,
		IsolatedHomes: o.nodeIsolated,
		FleetAccounts: o.nodeFleet,
		AgentChecks:   o.nodeChecks,
		Probe:         o.nodeProbe,
		Adopt:         o.nodeAdopt,
		TokenCustody:  o.cfg.TokenCustody, // --dev --token-custody: the dev node takes part too
		LogFormat:     o.format(),
		LogLevel:      o.logLevel,
		Env:           nodeEnv(os.Environ()),
	}
	if nd.Name == "" {
		nd.Name, _ = os.Hostname()
	}
	nd.MetricsListen = devmode.NodeMetricsListen(o.cfg.MetricsListen)
	if cmd.Flags().Changed("node-metrics-listen") {
		nd.MetricsListen = o.nodeMetrics
	}
	var err error
	if nd.Bin, err = nodebin.Find(cmd.Context(), o.nodeBin, filepath.Join(nd.DataDir, "bin"), lg); errors.Is(err, nodebin.ErrNotFound) {
		return nd, fmt.Errorf("--dev runs the node binary as its dev node, and there is %w: build both (go build -o bin/ ./cmd/... or make build), or name it with --node-bin", err)
	} else if err != nil {
		return nd, fmt.Errorf("--dev: %w (or name a node binary with --node-bin)", err)
	}
	return nd, nil
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
	api, err := kube.InCluster()
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
		RunE: cmdrun.Logged(func() string { return "json" }, func() string { return "info" }, func(cmd *cobra.Command, lg *zap.Logger) error {
			api, err := kube.InCluster()
			if err != nil {
				return err
			}
			return kubeboot.Bootstrap(cmd.Context(), api, boot, lg)
		}),
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
