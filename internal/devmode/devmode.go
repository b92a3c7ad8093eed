// Package devmode runs the whole of cast from one command, the way
// `nomad agent -dev` does: embedded etcd and a control plane in this
// process, and a local node as its child process (the node binary), all
// on loopback.
package devmode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/netaddr"
)

// CheckLoopback refuses a dev listener that is not on loopback: dev mode
// hands its admin token to the local user (and may serve plaintext with
// --insecure).
func CheckLoopback(addr string) error {
	if !netaddr.IsLoopback(addr) {
		return fmt.Errorf("--dev listens on loopback only; %q is not a loopback address", addr)
	}
	return nil
}

// Options are what --dev adds to the control plane's flags.
type Options struct {
	// RotateToken makes a new admin token for the local context even when
	// the stored one is still good (--rotate-dev-token), revoking it.
	RotateToken bool
	// DataDir is the data dir given (--data-dir, or its default), which
	// the ready line names: the control plane's own is the etcd folder
	// inside it, the node's its node folder.
	DataDir string
}

// Run serves until ctx ends or the dev node exits.
func Run(ctx context.Context, cp controlplane.Config, nd Node, opts Options, lg *zap.Logger) error {
	for _, a := range []string{cp.Listen, cp.MetricsListen, nd.MetricsListen, cp.Web.Listen} {
		if a == "" {
			continue
		}
		if err := CheckLoopback(a); err != nil {
			return err
		}
	}
	cp.Insecure = !cp.TLS.Enabled // plaintext (--insecure) on loopback only (checked above)
	cp.Dev = true                 // the secrets key may stay in the data dir
	hello := helloOf(&cp, nd.Name)
	srv, err := controlplane.Start(ctx, cp, lg)
	if err != nil {
		return err
	}
	defer srv.Stop()
	if err := credentials(ctx, srv, nd, opts, lg); err != nil {
		return err
	}
	// The pin is "" without --tls; the node's metrics are plain HTTP
	// exactly when the control plane's are.
	node, err := startChild(ctx, nd, srv.Addr(), srv.CAPin(), cp.Insecure, lg)
	if err != nil {
		return err
	}
	defer node.stop(lg) // the node stops before the control plane it talks to
	return serve(ctx, srv, node, hello, nd, opts.DataDir, lg)
}

// helloOf is the hello of the node named node to the control plane cp
// configures (the first, if it says hello more than once): it says which
// of its agents are ready, which is the banner's.
func helloOf(cp *controlplane.Config, node string) <-chan *castv1.Node {
	hello := make(chan *castv1.Node, 1)
	cp.NodeHello = func(n *castv1.Node) {
		if n.GetName() == node {
			select {
			case hello <- n:
			default:
			}
		}
	}
	return hello
}

// credentials gives the dev node its own credential in its data dir, and
// the local user a context with an admin token, so `cast` works at once.
func credentials(ctx context.Context, srv *controlplane.Server, nd Node, opts Options, lg *zap.Logger) error {
	cred, err := srv.IssueNodeCredential(ctx, nd.Name)
	if err != nil {
		return fmt.Errorf("dev node credential: %w", err)
	}
	if err := client.WriteNodeCredential(nd.DataDir, cred); err != nil {
		return fmt.Errorf("dev node credential: %w", err)
	}
	// A certificate from the last start is bound to the credential just
	// replaced: the node gets a new one for the new credential.
	if err := os.Remove(filepath.Join(nd.DataDir, client.NodeIdentityFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("dev node certificate: %w", err)
	}
	return writeContext(ctx, srv, nd.Name, opts.RotateToken, lg)
}

// serve shows the banner once the dev node says hello, then waits until
// ctx ends or the node exits (an error when it failed on its own).
func serve(ctx context.Context, srv *controlplane.Server, node *child, hello <-chan *castv1.Node, nd Node, dataDir string, lg *zap.Logger) error {
	select {
	case n := <-hello:
		banner(lg, srv.Addr(), n, nd, dataDir)
		if u := srv.WebURL(); u != "" {
			lg.Info("web timeline: run `cast web` to open it signed in", zap.String("url", u))
		}
	case <-node.exited:
	case <-ctx.Done():
	}
	select {
	case <-node.exited:
		// A signal to the process group (Ctrl-C) stops the node as well,
		// cleanly: the control plane then stops with it, as it does on
		// its own signal, just after.
		if node.err != nil && ctx.Err() == nil {
			return fmt.Errorf("the dev node exited (its log is above): %w", node.err)
		}
		lg.Info("the dev node stopped; stopping")
	case <-ctx.Done():
	}
	return nil
}

// banner says the dev setup is up and which agents can answer, from the
// node's hello: the first ready one is the one to try; the others say
// what they need.
func banner(lg *zap.Logger, addr string, n *castv1.Node, nd Node, dataDir string) {
	try := ""
	for _, in := range n.GetAgents() {
		if in.GetReady() {
			if try == "" {
				try = in.GetName()
			}
			continue
		}
		lg.Warn("agent not ready", zap.String("agent", in.GetName()), zap.String("why", in.GetStatus()))
	}
	fields := []zap.Field{zap.String("addr", addr), zap.String("node", nd.Name), zap.String("data_dir", dataDir),
		zap.Bool("isolated_homes", nd.IsolatedHomes)}
	if try == "" {
		lg.Warn("dev mode ready, but no agent has a login: `cast nodes` says what to run", fields...)
		return
	}
	lg.Info("dev mode ready", append(fields, zap.String("try", "cast new --agent "+try+` "hello"; cast ls; cast nodes`))...)
}

// NodeMetricsListen is the dev node's metrics address when
// --node-metrics-listen is not given: the control plane's --metrics-listen
// host with the next port (127.0.0.1:7779 beside 7778), port 0 beside port
// 0 (tests run side by side), and off when the control plane's is off.
func NodeMetricsListen(cpMetrics string) string {
	host, port, err := net.SplitHostPort(cpMetrics)
	if cpMetrics == "" || err != nil {
		return ""
	}
	p, err := strconv.Atoi(port)
	if err != nil || p == 0 || p >= 65535 {
		return net.JoinHostPort(host, "0")
	}
	return net.JoinHostPort(host, strconv.Itoa(p+1))
}

// WebListen is the dev web timeline's address: 127.0.0.1:7780 beside the
// default --listen (7777, 7778 and the node's 7779); beside any other
// --listen, a port the kernel picks on its host (the log and `cast web`
// name it), so dev processes started side by side (tests) never collide.
func WebListen(listen string) string {
	if listen == controlplane.DefaultListen {
		return DefaultWebListen
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(host, "0")
}

// DefaultWebListen is the web timeline's address under --dev.
const DefaultWebListen = "127.0.0.1:7780"

// ContextName is the context `controlplane --dev` writes.
const ContextName = "dev"

// writeContext stores the address, an admin token and the dev node (this
// machine's node, where sessions made here go) as the local user's current
// context "dev". It keeps the token already there while the
// store still knows it, so a restart leaves running `cast watch`es and
// retrying `cast send`s their credential; a new one (revoking the old) is
// made when it is gone, or when rotate asks.
func writeContext(ctx context.Context, srv *controlplane.Server, node string, rotate bool, lg *zap.Logger) error {
	path := client.ConfigPath(os.Getenv)
	cfg, err := client.LoadConfig(path)
	if err != nil {
		return fmt.Errorf("read the cast context %s: %w", path, err)
	}
	next, kept := client.Context{}, false
	if old := cfg.Contexts[ContextName]; old != nil && !rotate {
		if kept, err = srv.TokenLive(ctx, storedCred(old), authz.Admin, ContextName); err != nil {
			return fmt.Errorf("dev admin token: %w", err)
		}
		next = *old
	}
	if !kept {
		tok, err := srv.ReplaceToken(ctx, authz.Admin, ContextName)
		if err != nil {
			return fmt.Errorf("dev admin token: %w", err)
		}
		next = client.Context{Token: tok}
	}
	next.Addr, next.CA, next.Node = srv.Addr(), srv.CAFile(), node
	if err := client.SetContext(path, ContextName, next); err != nil {
		return fmt.Errorf("write the cast context %s: %w", path, err)
	}
	lg.Info("cast context written", zap.String("path", path), zap.String("context", ContextName), zap.Bool("token_kept", kept))
	return nil
}

// storedCred is the hash of the credential record a context presents: its
// token's, or (after `cast token cert`) its certificate's; "" for none.
func storedCred(c *client.Context) string {
	if c.Token != "" {
		return authz.Hash(c.Token)
	}
	if c.Cert == "" {
		return ""
	}
	id, err := client.LoadIdentity(c.Cert)
	if err != nil || !id.HasCert() || id.Cert().Leaf == nil {
		return ""
	}
	return id.Cert().Leaf.Subject.SerialNumber
}
