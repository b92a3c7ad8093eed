// Package devmode runs the whole of cast in one process, the way
// `nomad agent -dev` does: embedded etcd, a control plane and a local node,
// all on loopback.
package devmode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/node"
)

// CheckLoopback refuses a dev listener that is not on loopback: dev mode
// hands its admin token to the local user (and may serve plaintext with
// --insecure).
func CheckLoopback(addr string) error {
	if !client.IsLoopback(addr) {
		return fmt.Errorf("--dev listens on loopback only; %q is not a loopback address", addr)
	}
	return nil
}

// Options are what --dev adds to the control plane's and the node's flags.
type Options struct {
	// RotateToken makes a new admin token for the local context even when
	// the stored one is still good (--rotate-dev-token), revoking it.
	RotateToken bool
}

// Run serves until ctx ends. The node's ControlPlane address is filled in.
func Run(ctx context.Context, cp controlplane.Config, nc node.Config, opts Options, lg *zap.Logger) error {
	for _, a := range []string{cp.Listen, cp.MetricsListen, nc.MetricsListen, cp.Web.Listen} {
		if a == "" {
			continue
		}
		if err := CheckLoopback(a); err != nil {
			return err
		}
	}
	cp.Insecure = !cp.TLS.Enabled // plaintext (--insecure) on loopback only (checked above)
	cp.Dev = true                 // the secrets key may stay in the data dir
	srv, err := controlplane.Start(ctx, cp, lg)
	if err != nil {
		return err
	}
	defer srv.Stop()
	nc.ControlPlane, nc.CAPin = srv.Addr(), srv.CAPin() // the pin is "" without --tls
	nc.Insecure = cp.Insecure                           // its metrics: plain HTTP exactly when the control plane's are
	// The in-process node gets its own credential directly, and the local
	// user a context with an admin token, so `cast` works at once.
	cred, err := srv.IssueNodeCredential(ctx, nc.Name)
	if err != nil {
		return fmt.Errorf("dev node credential: %w", err)
	}
	if err := node.WriteCredential(nc.DataDir, cred); err != nil {
		return fmt.Errorf("dev node credential: %w", err)
	}
	// A certificate from the last start is bound to the credential just
	// replaced: the node gets a new one for the new credential.
	if err := os.Remove(node.IdentityPath(nc.DataDir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("dev node certificate: %w", err)
	}
	if err := writeContext(ctx, srv, nc.Name, opts.RotateToken, lg); err != nil {
		return err
	}
	agent, err := node.New(nc, lg)
	if err != nil {
		return err
	}
	nctx, stopNode := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = agent.Run(nctx) }()
	banner(lg, srv.Addr(), nc, cp.DataDir)
	if u := srv.WebURL(); u != "" {
		lg.Info("web timeline: run `cast web` to open it signed in", zap.String("url", u))
	}
	<-ctx.Done()
	stopNode() // the node stops before the control plane it talks to
	wg.Wait()
	return nil
}

// banner says the dev setup is up and which agents can answer: the first
// ready one is the one to try; the others say what they need.
func banner(lg *zap.Logger, addr string, nc node.Config, dataDir string) {
	try := ""
	for _, in := range nc.Readiness() {
		if in.Ready {
			if try == "" {
				try = in.Name
			}
			continue
		}
		lg.Warn("agent not ready", zap.String("agent", in.Name), zap.String("why", in.Status))
	}
	fields := []zap.Field{zap.String("addr", addr), zap.String("node", nc.Name), zap.String("data_dir", dataDir),
		zap.Bool("isolated_homes", nc.IsolatedHomes)}
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
