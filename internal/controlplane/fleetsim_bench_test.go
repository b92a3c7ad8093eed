package controlplane_test

import (
	"context"
	"fmt"
	"os"
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
// production: ~5,000 heartbeats and ~180 messages a second): every node
// heartbeats every simHeartbeat (5,000 a second at 10,000 nodes) and the
// fleet's users send simMessages messages a second to simSessions
// sessions.
const (
	simHeartbeat = 2 * time.Second
	simMessages  = 180
	simSessions  = 60
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
// Two kinds of node client, a sub-benchmark each (as BenchmarkWatchFanout):
// clients=grpc, a gRPC client stream a node (goroutines and a timer each),
// and clients=frames, testharness.FrameConn streams with one goroutine
// playing every node's heartbeats, so the simulated fleet's own CPU,
// which shares the machine's cores, is not charged to the control plane.
//
//	go test -run '^$' -bench FleetSim -benchtime 1x -timeout 30m ./internal/controlplane
func BenchmarkFleetSim(b *testing.B) {
	b.Run("clients=grpc", func(b *testing.B) { benchFleetSim(b, false) })
	b.Run("clients=frames", func(b *testing.B) { benchFleetSim(b, true) })
}

func benchFleetSim(b *testing.B, frames bool) {
	sizes := []int{100, 1000, 10000}
	if testing.Short() {
		sizes = sizes[:2]
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sim := startFleetSim(ctx, b, 15*time.Second, frames)
	b.ResetTimer()
	for range b.N {
		for _, n := range sizes {
			sim.grow(ctx, n)
			r := sim.measure(ctx)
			tag := fmt.Sprintf("nodes=%d", n)
			b.ReportMetric(r.cores, tag+"_cp_cores")
			b.ReportMetric(r.simCores, tag+"_sim_cores")
			b.ReportMetric(r.rssMiB, tag+"_cp_rss_MiB")
			b.ReportMetric(r.txns, tag+"_etcd_txns/s")
			b.ReportMetric(r.p99, tag+"_send_p99_ms")
			b.Logf("%6d nodes: %.0f heartbeats/s, %.0f messages/s: control plane %.2f cores, %.0f MiB; etcd %.0f txns/s; send p50 %.1f ms, p99 %.1f ms; this process (etcd and the fleet) %.2f cores",
				n, r.beats, r.sent, r.cores, r.rssMiB, r.txns, r.p50, r.p99, r.simCores)
		}
	}
}

// TestFleetSimRuns is the simulator's short mode in the normal test run:
// 20 nodes for a 3-second window, asserting only that every figure is
// produced (heartbeats and messages were played, etcd was written, the
// process was measured), never a timing, so the simulator cannot rot.
func TestFleetSimRuns(t *testing.T) {
	t.Parallel() // most of it is building the binaries
	for _, frames := range []bool{false, true} {
		t.Run(fmt.Sprintf("frames=%v", frames), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sim := startFleetSim(ctx, t, 3*time.Second, frames)
			sim.grow(ctx, 20)
			r := sim.measure(ctx)
			if r.beats <= 0 || r.sent <= 0 || r.txns <= 0 || r.rssMiB <= 0 || r.p99 <= 0 {
				t.Fatalf("a figure was not produced: %+v", r)
			}
		})
	}
}

type fleetSim struct {
	tb       testing.TB
	addr     string
	admin    *client.Client
	raw      *clientv3.Client
	pid      int
	window   time.Duration
	conns    []*client.Client // clients=grpc: the nodes' and the users'
	frames   *simFrames       // clients=frames: the nodes'
	senders  []*client.Client // the users'
	nodes    int
	beats    atomic.Int64
	sessions []string
}

// simRow is what one size cost: per second, and the send latencies in ms.
type simRow struct {
	beats, sent, txns, cores, rssMiB, p50, p99 float64
	simCores                                   float64 // this process: etcd, the simulated fleet and its users
}

// startFleetSim runs the control plane process on an etcd of its own.
func startFleetSim(ctx context.Context, tb testing.TB, window time.Duration, frames bool) *fleetSim {
	ep := testharness.StartEtcd(tb, nil)
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = raw.Close() })
	cp := testharness.StartControlPlaneProc(tb, "--etcd-endpoints", ep, "--node-heartbeat", simHeartbeat.String(), "--node-lease-ttl", "10s")
	s := &fleetSim{tb: tb, addr: cp.Addr, admin: testharness.Dial(tb, cp.Addr), raw: raw, pid: cp.Proc.Cmd.Process.Pid, window: window}
	if frames {
		s.frames = startSimFrames(ctx, s)
		for range 4 {
			s.senders = append(s.senders, testharness.Dial(tb, cp.Addr))
		}
	}
	return s
}

// grow connects simulated nodes until there are n, then makes the
// sessions the users send to (on the first nodes) once.
func (s *fleetSim) grow(ctx context.Context, n int) {
	for ; s.nodes < n; s.nodes++ {
		if s.frames != nil {
			s.frames.node(s.nodes)
			continue
		}
		if s.nodes%simPerConn == 0 {
			s.conns = append(s.conns, testharness.Dial(s.tb, s.addr))
		}
		s.node(ctx, s.conns[len(s.conns)-1], s.nodes)
	}
	if s.frames == nil {
		s.senders = s.conns // the nodes' connections carry the users' sends too
	}
	testharness.WaitFor(s.tb, 5*time.Minute, fmt.Sprintf("%d simulated nodes connected", n), func() bool {
		nodes, err := s.admin.AllNodes(ctx, &castv1.ListNodesRequest{Filter: `connected = true`, PageSize: 1000})
		return err == nil && len(nodes) >= n
	})
	for len(s.sessions) < simSessions {
		node := fmt.Sprintf("sim-%05d", len(s.sessions)%n)
		sess, err := s.admin.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: node})
		if err != nil {
			s.tb.Fatal(err)
		}
		s.sessions = append(s.sessions, sess.Id)
	}
}

// simHello is node i's first frame.
func simHello(i int) *castv1.ConnectRequest {
	return &castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Hello{Hello: &castv1.Hello{Node: &castv1.Node{
		Name: fmt.Sprintf("sim-%05d", i), Labels: []string{"sim"}, Agents: []*castv1.AgentInstall{{Name: "claude", Version: "sim"}}}}}}
}

// simOffset is when in the heartbeat interval node i's heartbeats fall
// (spread, as a fleet's are).
func simOffset(i int) time.Duration { return time.Duration(int64(simHeartbeat) * int64(i%97) / 97) }

// node plays one node: hello, then a heartbeat every simHeartbeat (the
// first at simOffset), and reads every frame it is sent until ctx ends.
func (s *fleetSim) node(ctx context.Context, c *client.Client, i int) {
	stream, err := c.Nodes.Connect(ctx)
	if err != nil {
		s.tb.Fatal(err)
	}
	if err := stream.Send(simHello(i)); err != nil {
		s.tb.Fatal(err)
	}
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				return
			}
		}
	}()
	go func() {
		t := time.NewTimer(simOffset(i))
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

// measure plays the message profile for the window and says what it
// cost the control plane.
func (s *fleetSim) measure(ctx context.Context) simRow {
	rev := func() int64 {
		r, err := s.raw.Get(ctx, "sim-probe")
		if err != nil {
			s.tb.Fatal(err)
		}
		return r.Header.Revision
	}
	rev0, cpu0, beats0, start := rev(), cpuTime(s.tb, s.pid), s.beats.Load(), time.Now()
	sim0 := cpuTime(s.tb, os.Getpid())
	lat := s.send(ctx)
	wall := time.Since(start).Seconds()
	r := simRow{
		txns:     float64(rev()-rev0) / wall,
		cores:    (cpuTime(s.tb, s.pid) - cpu0).Seconds() / wall,
		simCores: (cpuTime(s.tb, os.Getpid()) - sim0).Seconds() / wall,
		beats:    float64(s.beats.Load()-beats0) / wall,
		sent:     float64(len(lat)) / wall,
		rssMiB:   float64(rssBytes(s.tb, s.pid)) / (1 << 20),
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Millisecond) }
		r.p50, r.p99 = p(0.5), p(0.99)
	}
	return r
}

// send sends simMessages a second for the window, spread over the sessions
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
			c := s.senders[i%len(s.senders)]
			for range int(s.window.Seconds()) * perSender {
				<-t.C
				at := time.Now()
				if _, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: id, Text: text}); err != nil {
					s.tb.Error(err)
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

// simFrames plays clients=frames' nodes: their Connect streams over
// FrameConns (simPerConn a connection), and every node's heartbeats from
// one goroutine, a tick every simTick sending those of the nodes whose
// offset falls in it.
type simFrames struct {
	s     *fleetSim
	conns []*testharness.FrameConn // grow's alone
	mu    sync.Mutex               // slots, shared with beat
	slots [][]simFrameNode         // by tick of the interval
}

type simFrameNode struct {
	conn *testharness.FrameConn
	id   uint32
	seq  int64
}

const simTick = 10 * time.Millisecond

func startSimFrames(ctx context.Context, s *fleetSim) *simFrames {
	f := &simFrames{s: s, slots: make([][]simFrameNode, simHeartbeat/simTick)}
	go f.beat(ctx)
	return f
}

// node connects node i and gives it its heartbeat slot.
func (f *simFrames) node(i int) {
	if i%simPerConn == 0 {
		c, err := testharness.DialFrames(f.s.addr, testharness.AdminToken(), nil)
		if err != nil {
			f.s.tb.Fatal(err)
		}
		f.s.tb.Cleanup(func() { c.Close() })
		f.conns = append(f.conns, c)
	}
	c := f.conns[len(f.conns)-1]
	id, err := c.Open("/"+castv1.NodeService_ServiceDesc.ServiceName+"/Connect", simHello(i))
	if err != nil {
		f.s.tb.Fatal(err)
	}
	slot := int(simOffset(i) / simTick)
	f.mu.Lock()
	f.slots[slot] = append(f.slots[slot], simFrameNode{conn: c, id: id})
	f.mu.Unlock()
}

// beat sends each slot's heartbeats at its tick until ctx ends; a node
// whose send fails (its connection is gone) stops beating, as a gRPC
// node's goroutine does.
func (f *simFrames) beat(ctx context.Context) {
	t := time.NewTicker(simTick)
	defer t.Stop()
	for tick := 0; ; tick = (tick + 1) % len(f.slots) {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		nodes := f.slots[tick]
		for i := range nodes {
			n := &nodes[i]
			if n.conn == nil {
				continue
			}
			n.seq++
			if n.conn.Send(n.id, &castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Heartbeat{Heartbeat: &castv1.Heartbeat{Seq: n.seq}}}) != nil {
				n.conn = nil
				continue
			}
			f.s.beats.Add(1)
		}
		f.mu.Unlock()
	}
}
