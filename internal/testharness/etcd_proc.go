package testharness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/etcdembed"
)

// etcdMemberEnv carries a member's config to a test binary started as an
// etcd member (RunEtcdMemberIfAsked).
const etcdMemberEnv = "CAST_TEST_ETCD_MEMBER"

// etcdReadyLine is what a member process prints once it serves.
const etcdReadyLine = "cast test etcd member ready"

// RunEtcdMemberIfAsked makes the calling test binary an etcd member when
// StartEtcdProcCluster started it as one: it serves until SIGTERM (or is
// killed) and exits, never returning. Otherwise it returns at once. Call
// it first in TestMain of a package that uses StartEtcdProcCluster.
func RunEtcdMemberIfAsked() {
	cfg, ok := SelfConfig[etcdembed.Config](etcdMemberEnv, "etcd member")
	if !ok {
		return
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	e, err := etcdembed.Start(ctx, cfg, zap.NewNop())
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd member:", err)
		os.Exit(1)
	}
	fmt.Println(etcdReadyLine)
	select {
	case <-term:
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcd member:", err)
	}
	e.Close()
	os.Exit(0)
}

// EtcdProc is an etcd member in a process of its own (the test binary run
// as one), on fixed loopback ports and a data dir that outlive it, so a
// test can kill -9 it and start it again.
type EtcdProc struct {
	ClientURL string
	t         testing.TB
	cfg       etcdembed.Config
	proc      Slot[*Proc]
}

// EtcdProcCluster is a cluster of member processes on loopback.
type EtcdProcCluster struct {
	Members []*EtcdProc
}

// StartEtcdProcCluster starts n member processes and waits until every
// one serves. The test binary's TestMain must call RunEtcdMemberIfAsked.
func StartEtcdProcCluster(t testing.TB, n int) *EtcdProcCluster {
	t.Helper()
	c := &EtcdProcCluster{}
	for _, cfg := range memberConfigs(t, n) {
		cfg.Dir, cfg.ClientAddr, cfg.QuotaBytes, cfg.NoAuth = t.TempDir(), freeLoopbackAddr(t), 256<<20, true
		c.Members = append(c.Members, &EtcdProc{ClientURL: "http://" + cfg.ClientAddr, t: t, cfg: cfg})
	}
	// A member serves only once a quorum elected a leader: start all,
	// then wait for each.
	for _, m := range c.Members {
		m.spawn()
	}
	for _, m := range c.Members {
		if err := m.waitReady(); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// Endpoints are the members' client URLs.
func (c *EtcdProcCluster) Endpoints() []string {
	return clientURLs(c.Members, func(m *EtcdProc) string { return m.ClientURL })
}

// Leader is the index of the member that leads now (each member's
// etcd_server_is_leader gauge), waiting up to timeout for one.
func (c *EtcdProcCluster) Leader(t testing.TB, timeout time.Duration) int {
	t.Helper()
	leader := -1
	WaitFor(t, timeout, "an etcd leader", func() bool {
		for i, m := range c.Members {
			if m.isLeader() {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

func (m *EtcdProc) spawn() {
	_, _ = m.proc.Start(func() (*Proc, error) { return StartSelf(m.t, etcdMemberEnv, m.cfg), nil })
}

func (m *EtcdProc) waitReady() error {
	return m.proc.Now().AwaitLine(etcdReadyLine, "etcd member "+m.cfg.Name, 60*time.Second)
}

// Kill is kill -9 of the member's process.
func (m *EtcdProc) Kill() { m.proc.Stop((*Proc).Kill) }

// Start starts a killed member again on its data dir and ports.
func (m *EtcdProc) Start() error {
	m.spawn()
	return m.waitReady()
}

// isLeader reads the member's etcd_server_is_leader gauge from /metrics on
// its client URL; false when it cannot be read.
func (m *EtcdProc) isLeader() bool {
	if m.proc.Now() == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.ClientURL+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return err == nil && strings.Contains(string(b), "\netcd_server_is_leader 1")
}
