package faults_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/faults"
	"github.com/cast-dev/cast/internal/testharness"
)

// A slow etcd: every byte between the control plane and etcd is delayed
// (a disk whose fsyncs crawl), then etcd stalls outright for longer than a
// client waits, so writers time out and retry while their first attempt
// is still on its way and commits later. Appends slow down, and every
// acknowledged message is stored exactly once, byte-exact, retries and
// large (chunked) messages included.
func TestSlowEtcdLosesNothing(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	u, err := url.Parse(ep)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testharness.StartProxy(t, u.Host)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir = []string{"http://" + proxy.Addr}, ""
	})
	c := testharness.Dial(t, srv.Addr())
	dir, _ := startNode(t, srv.Addr(), "n1", "", noAgents)
	waitConnected(t, c, "n1", 30*time.Second)
	l := newLoad(c.Sessions, newSessions(t, c, "n1", "claude", "", 3))
	writers := scale(3, 4)
	stopLoad := l.start(writers, time.Duration(scale(240, 1800))*time.Second)
	defer stopLoad()

	latencies := []time.Duration{30 * time.Millisecond}
	if long {
		latencies = append(latencies, 100*time.Millisecond, 250*time.Millisecond)
	}
	for _, lat := range latencies {
		l.phase(t, phase, phaseWait, "acknowledgements at full speed")
		proxy.SetLatency(lat)
		from := time.Now()
		l.phase(t, phase, phaseWait, "acknowledgements through a slow etcd")
		// Every append is at least one round trip to etcd: its request
		// and its answer each wait lat.
		if fastest, n := l.fastestBetween(from, time.Now()); n == 0 || fastest < 2*lat {
			t.Fatalf("with %s each way, the fastest of %d appends took %s", lat, n, fastest)
		}

		// The stall: nothing moves for longer than a client waits (3 s),
		// so the writers' attempts time out and are retried while the
		// first ones are still held, to commit when etcd wakes.
		proxy.Blackhole(testharness.Both)
		f := l.failed()
		l.allow(writers)
		testharness.WaitFor(t, 30*time.Second, "writers timing out on a stalled etcd", func() bool { return l.failed() >= f+writers })
		proxy.Heal()
		proxy.SetLatency(0)
		l.phase(t, phase, phaseWait, "acknowledgements after the stall")
	}
	stopLoad()
	t.Log(l.summary())
	l.clean(t)
	check(t, faults.Checker{Sessions: c.Sessions, Claims: claims(map[string]string{"n1": dir})}, "slow etcd, stall", l.snapshot())
}
