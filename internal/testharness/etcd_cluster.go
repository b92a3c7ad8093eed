package testharness

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/etcdembed"
)

// EtcdCluster is a cluster of embedded etcd members on loopback, each
// stoppable and restartable on its own data dir and ports: the fault tests
// take members away to lose one, then quorum, and bring them back.
type EtcdCluster struct {
	Members []*RestartableEtcd
}

// StartEtcdCluster starts n members and waits until every one serves.
func StartEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	peers := make([]string, n)
	initial := make([]string, n)
	for i := range n {
		peers[i] = freeLoopbackAddr(t)
		initial[i] = fmt.Sprintf("m%d=http://%s", i, peers[i])
	}
	c := &EtcdCluster{}
	for i := range n {
		c.Members = append(c.Members, newRestartable(t, etcdembed.Config{
			Name: fmt.Sprintf("m%d", i), PeerAddr: peers[i], InitialCluster: strings.Join(initial, ","),
		}))
	}
	// A member is ready only once a quorum has elected a leader, so all
	// of them start at once.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = m.Start() }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("etcd member m%d: %v", i, err)
		}
	}
	return c
}

// Endpoints are the members' client URLs, for a client that fails over.
func (c *EtcdCluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.ClientURL
	}
	return out
}

// Leader is the index of the member that leads the cluster, waiting up to
// timeout for one to be elected.
func (c *EtcdCluster) Leader(t testing.TB, timeout time.Duration) int {
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
