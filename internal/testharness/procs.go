package testharness

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/listfilter"
)

// ControlPlaneProc is a controlplane process with its embedded etcd on a
// fixed address, data dir and secrets key, so a kill -9 and a Start resume
// the same store on the same port, as an operator's restart does.
type ControlPlaneProc struct {
	t       testing.TB
	Addr    string
	DataDir string
	Args    []string // flags after the harness's
	Proc    *Proc    // the running (or last) process
}

// StartControlPlaneProc starts a control plane process (node lease
// TestLease, heartbeats every 500ms, args added) and waits until it
// answers.
func StartControlPlaneProc(t testing.TB, args ...string) *ControlPlaneProc {
	dir := t.TempDir()
	c := &ControlPlaneProc{t: t, Addr: FreeAddr(t), DataDir: filepath.Join(dir, "data"),
		Args: append([]string{"--secrets-key-file", filepath.Join(dir, "secrets.key"), "--node-lease-ttl", TestLease.String(),
			"--node-heartbeat", "500ms", "--metrics-listen", ""}, args...)}
	c.Start()
	return c
}

// Start runs the process again on the same address and data dir and waits
// (up to a minute) until it answers.
func (c *ControlPlaneProc) Start() {
	c.t.Helper()
	c.Proc = StartProc(c.t, filepath.Join(Binaries(c.t), "controlplane"),
		append([]string{"--listen", c.Addr, "--data-dir", c.DataDir}, c.Args...)...)
	cl, err := client.DialToken(c.Addr, AdminToken())
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	WaitFor(c.t, time.Minute, "control plane "+c.Addr+" up", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cl.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
		return err == nil
	})
}

// Kill is kill -9 of the process.
func (c *ControlPlaneProc) Kill() { c.Proc.Kill() }

// NodeProc is a node process with fixed arguments (its name and data dir
// among them), so Start after a kill -9 brings back the same node.
type NodeProc struct {
	t    testing.TB
	Name string
	Args []string
	Proc *Proc
	up   bool
}

// NewNodeProc is a node named name talking to addr, with its own data dir
// and args added; Start runs it.
func NewNodeProc(t testing.TB, addr, name string, args ...string) *NodeProc {
	return &NodeProc{t: t, Name: name,
		Args: append([]string{"--controlplane", addr, "--data-dir", filepath.Join(t.TempDir(), name), "--name", name}, args...)}
}

// Start runs the node and waits (up to a minute) until c lists it
// connected.
func (n *NodeProc) Start(c *client.Client) {
	n.t.Helper()
	started := time.Now()
	n.Proc = StartProc(n.t, filepath.Join(Binaries(n.t), "node"), n.Args...)
	n.up = true
	WaitFor(n.t, time.Minute, "node "+n.Name+" connected", func() bool { return NodeConnectedSince(c, n.Name, started) })
}

// Kill is kill -9 of the node process (the agent CLIs it started run in
// process groups of their own and live on, as after a real crash).
func (n *NodeProc) Kill() {
	n.Proc.Kill()
	n.up = false
}

// Up says whether the process was started and not killed since.
func (n *NodeProc) Up() bool { return n.up }

// NodeConnected says whether c lists node as connected (false when it
// cannot ask).
func NodeConnected(c *client.Client, node string) bool {
	return NodeConnectedSince(c, node, time.Time{})
}

// NodeConnectedSince is NodeConnected for a stream opened at since or
// later: a node killed a moment ago may still show connected on its old
// stream, before its restarted process has even stopped the CLIs the
// killed one left running (its connect time is the control plane's
// clock, this machine's).
func NodeConnectedSince(c *client.Client, node string, since time.Time) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{Filter: listfilter.Equal("name", node)})
	if err != nil {
		return false
	}
	for _, nd := range resp.Nodes {
		if nd.Name == node {
			return nd.Connected && (since.IsZero() || nd.ConnectTime != nil && !nd.ConnectTime.AsTime().Before(since))
		}
	}
	return false
}
