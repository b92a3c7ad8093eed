package testharness

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cast-dev/cast/internal/etcdembed"
)

// EtcdCluster is a cluster of embedded etcd members on loopback, each
// stoppable and restartable on its own data dir and ports: the fault tests
// take members away to lose one, then quorum, and bring them back.
type EtcdCluster struct {
	Members []*RestartableEtcd
}

// memberConfigs names n members (m0, m1, ...) on free loopback peer ports,
// each knowing the whole initial cluster.
func memberConfigs(t testing.TB, n int) []etcdembed.Config {
	t.Helper()
	peers := make([]string, n)
	initial := make([]string, n)
	for i := range n {
		peers[i] = freeLoopbackAddr(t)
		initial[i] = fmt.Sprintf("m%d=http://%s", i, peers[i])
	}
	out := make([]etcdembed.Config, n)
	for i := range n {
		out[i] = etcdembed.Config{Name: fmt.Sprintf("m%d", i), PeerAddr: peers[i], InitialCluster: strings.Join(initial, ",")}
	}
	return out
}

// StartEtcdCluster starts n members and waits until every one serves.
func StartEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	c := &EtcdCluster{}
	for _, cfg := range memberConfigs(t, n) {
		c.Members = append(c.Members, newRestartable(t, cfg))
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
	return clientURLs(c.Members, func(m *RestartableEtcd) string { return m.ClientURL })
}

// clientURLs is url of each of members, in order: the Endpoints of an
// in-process cluster and of a cluster of processes.
func clientURLs[M any](members []M, url func(M) string) []string {
	out := make([]string, len(members))
	for i, m := range members {
		out[i] = url(m)
	}
	return out
}
