// Package devmode runs the whole of cast in one process, the way
// `nomad agent -dev` does: embedded etcd, a control plane and a local node,
// all on loopback.
package devmode

import (
	"context"
	"fmt"
	"net"
	"sync"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/nodeagent"
)

// CheckLoopback refuses a dev listener that is not on loopback: dev mode
// has no authentication.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--dev listens on loopback only; %q is not a loopback address", addr)
	}
	return nil
}

// Run serves until ctx ends. The node's ControlPlane address is filled in.
func Run(ctx context.Context, cp controlplane.Config, node nodeagent.Config, lg *zap.Logger) error {
	for _, a := range []string{cp.Listen, cp.MetricsListen} {
		if a == "" {
			continue
		}
		if err := CheckLoopback(a); err != nil {
			return err
		}
	}
	srv, err := controlplane.Start(ctx, cp, lg)
	if err != nil {
		return err
	}
	defer srv.Stop()
	node.ControlPlane = srv.Addr()
	agent, err := nodeagent.New(node, lg)
	if err != nil {
		return err
	}
	nctx, stopNode := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = agent.Run(nctx) }()
	lg.Info("dev mode ready: try `cast new --agent claude \"hello\"`, `cast ls`, `cast nodes`",
		zap.String("addr", srv.Addr()), zap.String("node", node.Name), zap.String("data_dir", cp.DataDir))
	<-ctx.Done()
	stopNode() // the node stops before the control plane it talks to
	wg.Wait()
	return nil
}
