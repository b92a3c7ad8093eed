package controlplane_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// The fleet profile the simulator plays (issue 25, from one peer's
// production): every node heartbeats every simHeartbeat and the fleet's
// users send simMessages messages a second to simSessions sessions.
const (
	simHeartbeat = 3 * time.Second
	simMessages  = 180
	simSessions  = 60
	simWindow    = 15 * time.Second
	simPerConn   = 200 // node streams per gRPC connection
)

// BenchmarkFleetSim is the fleet simulator: N simulated nodes (each a
// Connect stream that says hello, heartbeats on the profile and reads
// whatever it is sent) and users sending simMessages a second, against a
// control plane run as its own process on an etcd of its own. For each
// size it reports what the control plane costs: its CPU (cores busy),
// resident memory, etcd txns a second (the etcd revision's growth: one
// per txn, however many keys it writes; group commit puts many messages in
// one) and
// the p50/p99 of a SendMessage, beside the heartbeats and messages a
// second actually played. N = 100, 1,000 and 10,000 (-short: up to 1,000).
//
//	go test -run '^$' -bench FleetSim -benchtime 1x -timeout 30m ./internal/controlplane
func BenchmarkFleetSim(b *testing.B) {
	sizes := []int{100, 1000, 10000}
	if testing.Short() {
		sizes = sizes[:2]
	}
	ep := testharness.StartEtcd(b, nil)
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	cp := testharness.StartControlPlaneProc(b, "--etcd-endpoints", ep, "--node-heartbeat", simHeartbeat.String(), "--node-lease-ttl", "10s")
	admin := testharness.Dial(b, cp.Addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sim := &fleetSim{b: b, addr: cp.Addr, admin: admin}
	b.ResetTimer()
	for range b.N {
		for _, n := range sizes {
			sim.grow(ctx, n)
			sim.measure(ctx, n, raw, cp.Proc.Cmd.Process.Pid)
		}
	}
}

type fleetSim struct {
	b        *testing.B
	addr     string
	admin    *client.Client
	conns    []*client.Client
	nodes    int
	beats    atomic.Int64
	sessions []string
}

// grow connects simulated nodes until there are n, then makes the
// sessions the users send to (on the first nodes) once.
func (s *fleetSim) grow(ctx context.Context, n int) {
	for ; s.nodes < n; s.nodes++ {
		if s.nodes%simPerConn == 0 {
			s.conns = append(s.conns, testharness.Dial(s.b, s.addr))
		}
		s.node(ctx, s.conns[len(s.conns)-1], fmt.Sprintf("sim-%05d", s.nodes))
	}
	testharness.WaitFor(s.b, 5*time.Minute, fmt.Sprintf("%d simulated nodes connected", n), func() bool {
		nodes, err := s.admin.AllNodes(ctx, &castv1.ListNodesRequest{Filter: `connected = true`, PageSize: 1000})
		return err == nil && len(nodes) >= n
	})
	for len(s.sessions) < simSessions {
		node := fmt.Sprintf("sim-%05d", len(s.sessions)%n)
		sess, err := s.admin.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: node})
		if err != nil {
			s.b.Fatal(err)
		}
		s.sessions = append(s.sessions, sess.Id)
	}
}

// node plays one node: hello, then a heartbeat every simHeartbeat (the
// first at a random point of the interval, as a fleet's are spread), and
// reads every frame it is sent until ctx ends.
func (s *fleetSim) node(ctx context.Context, c *client.Client, name string) {
	stream, err := c.Nodes.Connect(ctx)
	if err != nil {
		s.b.Fatal(err)
	}
	hello := &castv1.Hello{Node: &castv1.Node{Name: name, Labels: []string{"sim"},
		Agents: []*castv1.AgentInstall{{Name: "claude", Version: "sim"}}}}
	if err := stream.Send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Hello{Hello: hello}}); err != nil {
		s.b.Fatal(err)
	}
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				return
			}
		}
	}()
	go func() {
		offset := time.Duration(int64(simHeartbeat) * int64(s.nodes%97) / 97)
		t := time.NewTimer(offset)
		defer t.Stop()
		for seq := int64(1); ; seq++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if stream.Send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Heartbeat{Heartbeat: &castv1.Heartbeat{Seq: seq}}}) != nil {
				return
			}
			s.beats.Add(1)
			t.Reset(simHeartbeat)
		}
	}()
}

// measure plays the message profile for simWindow and reports what it
// cost the control plane.
func (s *fleetSim) measure(ctx context.Context, n int, raw *clientv3.Client, pid int) {
	rev := func() int64 {
		r, err := raw.Get(ctx, "sim-probe")
		if err != nil {
			s.b.Fatal(err)
		}
		return r.Header.Revision
	}
	rev0, cpu0, beats0, start := rev(), cpuTime(s.b, pid), s.beats.Load(), time.Now()
	lat := s.send(ctx)
	wall := time.Since(start)
	writes := float64(rev()-rev0) / wall.Seconds()
	cores := (cpuTime(s.b, pid) - cpu0).Seconds() / wall.Seconds()
	beats := float64(s.beats.Load()-beats0) / wall.Seconds()
	slices.Sort(lat)
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Millisecond) }
	rss := float64(rssBytes(s.b, pid)) / (1 << 20)
	sent := float64(len(lat)) / wall.Seconds()
	tag := fmt.Sprintf("nodes=%d", n)
	s.b.ReportMetric(cores, tag+"_cp_cores")
	s.b.ReportMetric(rss, tag+"_cp_rss_MiB")
	s.b.ReportMetric(writes, tag+"_etcd_txns/s")
	s.b.ReportMetric(p(0.99), tag+"_send_p99_ms")
	s.b.Logf("%6d nodes: %.0f heartbeats/s, %.0f messages/s: control plane %.2f cores, %.0f MiB; etcd %.0f txns/s; send p50 %.1f ms, p99 %.1f ms",
		n, beats, sent, cores, rss, writes, p(0.5), p(0.99))
}

// send sends simMessages a second for simWindow, spread over the sessions
// by as many senders, and returns each send's latency.
func (s *fleetSim) send(ctx context.Context) []time.Duration {
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	perSender := simMessages / len(s.sessions) // messages a second each
	text := strings.Repeat("m", 512)
	for i, id := range s.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(time.Second / time.Duration(max(perSender, 1)))
			defer t.Stop()
			c := s.conns[i%len(s.conns)]
			for range int(simWindow.Seconds()) * perSender {
				<-t.C
				at := time.Now()
				if _, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: id, Text: text}); err != nil {
					s.b.Error(err)
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(at))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return lat
}
