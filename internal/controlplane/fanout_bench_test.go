package controlplane_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// BenchmarkWatchFanout measures how long one append takes to reach every
// one of N WatchSession streams of a session (from the append's call to
// each stream's receipt: p50 and p99 over every stream of every append),
// at N = 10, 1,000 and 10,000 streams over up to 50 connections, and the
// control plane process's memory per open stream. The p99 at each N is
// reported against the p99 at 10 streams measured in the same run (the
// issue's target: within 3x at 10,000). The control plane runs as its own
// process (plaintext gRPC on loopback, as the harness starts it), so its
// memory is its own; the streams' clients run here. -short stops at 1,000
// streams.
//
// Memory per stream, each against the figure before any stream opened:
// resident (RSS), heap in use and stacks (from /metrics, garbage not yet
// collected counted in the heap), and the live heap: HeapAlloc right after
// a forced collection (/debug/pprof/heap?gc=1), taken once the streams
// are open and idle, which is what the streams hold. With
// CAST_FANOUT_HEAP_PROFILES=DIR the heap profile after that collection is
// kept as DIR/heap_nN.pb.gz (go tool pprof -top -sample_index=inuse_space);
// with CAST_FANOUT_CPU_PROFILES=DIR, a CPU profile of the control plane
// during each size's rounds (cpuProfile).
//
// Two kinds of client, a sub-benchmark each with a control plane of its
// own: clients=grpc, a gRPC client stream a watch (a goroutine each,
// every message decoded), and clients=frames, testharness.FrameConn: one
// goroutine a connection reading HTTP/2 frames, a message's arrival taken
// when its bytes are read. The streams' clients share the machine's cores
// with the control plane, and a gRPC client stream costs more CPU to take
// a message than the server spends sending it; the frame client is what a
// remote client looks like to those cores, so its figures are the
// server's fan-out, the gRPC clients' the whole loop on one machine.
//
//	go test -run '^$' -bench WatchFanout -benchtime 1x ./internal/controlplane
func BenchmarkWatchFanout(b *testing.B) {
	b.Run("clients=grpc", func(b *testing.B) { benchWatchFanout(b, false) })
	b.Run("clients=frames", func(b *testing.B) { benchWatchFanout(b, true) })
}

func benchWatchFanout(b *testing.B, frames bool) {
	sizes := testharness.FanoutSizes()
	metricsAddr := testharness.FreeAddr(b)
	cp := testharness.StartControlPlaneProc(b, "--max-watches", "20000", "--metrics-listen", metricsAddr, "--pprof")
	admin := testharness.Dial(b, cp.Addr)
	testharness.StartNode(b, cp.Addr, "bench", nil)
	testharness.WaitFor(b, time.Minute, "node bench connected", func() bool { return testharness.NodeConnected(admin, "bench") })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess, err := admin.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"})
	if err != nil {
		b.Fatal(err)
	}
	f := &fanoutBench{b: b, sid: sess.Id, admin: admin, text: strings.Repeat("x", 512)}
	for range min(50, sizes[len(sizes)-1]) {
		if !frames {
			f.conns = append(f.conns, testharness.Dial(b, cp.Addr))
			continue
		}
		c, err := testharness.DialFrames(cp.Addr, testharness.AdminToken(), f.arrived)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		f.frames = append(f.frames, c)
	}
	f.rounds(ctx, 5, 0) // warm the append path before the baseline
	rss0, mem0 := rssBytes(b, cp.Proc.Cmd.Process.Pid), scrapeMem(b, metricsAddr)
	live0 := liveHeap(b, metricsAddr, 0)
	var baseP99 time.Duration
	b.ResetTimer()
	for range b.N {
		for _, n := range sizes {
			f.openTo(ctx, n)
			cpu0 := cpuTime(b, cp.Proc.Cmd.Process.Pid)
			const rounds = 40
			prof := cpuProfile(b, metricsAddr, frames, n)
			lat := f.rounds(ctx, rounds, n)
			prof()
			cpuPer := (cpuTime(b, cp.Proc.Cmd.Process.Pid) - cpu0) / time.Duration(rounds*n)
			b.ReportMetric(float64(cpuPer)/float64(time.Microsecond), fmt.Sprintf("cp_cpu_us_per_delivery_n%d", n))
			p99, line := testharness.FanoutLatency(b, n, lat, baseP99)
			if n == sizes[0] {
				baseP99 = p99
			}
			perStream := float64(rssBytes(b, cp.Proc.Cmd.Process.Pid)-rss0) / float64(n)
			mem := scrapeMem(b, metricsAddr)
			heap, stack := (mem.heap-mem0.heap)/float64(n), (mem.stack-mem0.stack)/float64(n)
			goroutines := (mem.goroutines - mem0.goroutines) / float64(n)
			b.ReportMetric(heap/1024, fmt.Sprintf("heap_KiB_per_stream_n%d", n))
			b.ReportMetric(stack/1024, fmt.Sprintf("stack_KiB_per_stream_n%d", n))
			b.ReportMetric(goroutines, fmt.Sprintf("goroutines_per_stream_n%d", n))
			b.ReportMetric(perStream/1024, fmt.Sprintf("rss_KiB_per_stream_n%d", n))
			// Last: the forced collection must not change the figures
			// above from what they were before it was measured.
			live := float64(liveHeap(b, metricsAddr, n)-live0) / float64(n)
			b.ReportMetric(live/1024, fmt.Sprintf("live_heap_KiB_per_stream_n%d", n))
			b.Logf("%s  control plane CPU %v per delivery  per stream: +%.1f KiB RSS (heap in use +%.1f, stacks +%.1f), live heap after GC +%.1f KiB, +%.2f goroutines",
				line, cpuPer, perStream/1024, heap/1024, stack/1024, live/1024, goroutines)
		}
	}
}

// fanoutBench holds the open streams of one session and times appends
// reaching them.
type fanoutBench struct {
	b      *testing.B
	sid    string
	admin  *client.Client
	conns  []*client.Client         // clients=grpc
	frames []*testharness.FrameConn // clients=frames
	text   string
	open   int
	cur    atomic.Pointer[fanoutRound]
}

// fanoutRound is one append: when it was sent and when each stream got it.
type fanoutRound struct {
	seq   int64
	start time.Time
	lat   []time.Duration // by stream
	wg    sync.WaitGroup
}

// openTo opens streams (from the next message on) until n are open,
// several at once.
func (f *fanoutBench) openTo(ctx context.Context, n int) {
	var wg sync.WaitGroup
	errc := make(chan error, n)
	next := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f.openStream(ctx, i); err != nil {
					errc <- err
				}
			}
		}()
	}
	for i := f.open; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		f.b.Fatal(err)
	}
	f.open = max(f.open, n)
}

// openStream opens stream i and reads it until ctx ends, noting when
// each round's message arrived.
func (f *fanoutBench) openStream(ctx context.Context, i int) error {
	if f.frames != nil {
		return f.frames[i%len(f.frames)].Watch(i, &castv1.WatchSessionRequest{SessionId: f.sid})
	}
	w, err := f.conns[i%len(f.conns)].Sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: f.sid})
	if err != nil {
		return err
	}
	if _, err := w.Recv(); err != nil { // the session: the stream is open
		return fmt.Errorf("stream %d: %w", i, err)
	}
	go func() {
		for {
			ev, err := w.Recv()
			if err != nil {
				return
			}
			if m := ev.GetMessage(); m != nil {
				f.arrived(i, m.Seq, time.Now())
			}
		}
	}()
	return nil
}

// arrived notes that stream i got message seq at at.
func (f *fanoutBench) arrived(i int, seq int64, at time.Time) {
	if r := f.cur.Load(); r != nil && seq == r.seq {
		r.lat[i] = at.Sub(r.start)
		r.wg.Done()
	}
}

// rounds appends k messages one at a time, each after every one of n
// streams got the one before, and returns every stream's latency.
func (f *fanoutBench) rounds(ctx context.Context, k, n int) []time.Duration {
	var all []time.Duration
	for range k {
		last, err := f.admin.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: f.sid})
		if err != nil {
			f.b.Fatal(err)
		}
		r := &fanoutRound{seq: last.LastSeq + 1, lat: make([]time.Duration, n)}
		r.wg.Add(n)
		r.start = time.Now()
		f.cur.Store(r)
		if _, err := f.admin.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: f.sid, Messages: []*castv1.Message{
			{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Agent: "claude", Text: f.text}}}); err != nil {
			f.b.Fatal(err)
		}
		r.wg.Wait()
		all = append(all, r.lat...)
	}
	return all
}

// cpuTime is the CPU time (user and system) a process has used, from
// /proc/PID/stat in clock ticks (100 a second on Linux).
func cpuTime(b testing.TB, pid int) time.Duration {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command (in parentheses, which may hold spaces):
	// utime and stime are the 12th and 13th.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("parse /proc/%d/stat: %v %v", pid, err1, err2)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// rssBytes is a process's resident set size.
func rssBytes(b testing.TB, pid int) int64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/pid/status")
	return 0
}

// procMem is what a Go process's /metrics says of its memory.
type procMem struct{ heap, stack, goroutines float64 }

// scrapeMem reads the control plane process's heap and stack in use and
// its goroutines from its /metrics.
func scrapeMem(b *testing.B, addr string) procMem {
	b.Helper()
	body := httpGet(b, "http://"+addr+"/metrics")
	var m procMem
	for _, line := range strings.Split(string(body), "\n") {
		name, v, _ := strings.Cut(line, " ")
		f, _ := strconv.ParseFloat(v, 64)
		switch name {
		case "go_memstats_heap_inuse_bytes":
			m.heap = f
		case "go_memstats_stack_inuse_bytes":
			m.stack = f
		case "go_goroutines":
			m.goroutines = f
		}
	}
	return m
}

// cpuProfile, with CAST_FANOUT_CPU_PROFILES=DIR, starts a 3-second CPU
// profile of the control plane process (the rounds at 10,000 streams take
// about that long); the function it returns waits for it and keeps it as
// DIR/cpu_grpc_nN.pb.gz or DIR/cpu_frames_nN.pb.gz. Unset, it does nothing.
func cpuProfile(b *testing.B, addr string, frames bool, n int) (wait func()) {
	dir := os.Getenv("CAST_FANOUT_CPU_PROFILES")
	if dir == "" {
		return func() {}
	}
	kind := map[bool]string{false: "grpc", true: "frames"}[frames]
	type result struct {
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() { // not httpGet: it fails the benchmark, which only its own goroutine may
		resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=3")
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		done <- result{body, err}
	}()
	return func() {
		r := <-done
		if r.err != nil {
			b.Fatal(r.err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("cpu_%s_n%d.pb.gz", kind, n)), r.body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// liveHeap forces a collection in the control plane process and returns
// its HeapAlloc right after (the heap profile's debug text ends with the
// runtime.MemStats it read). With CAST_FANOUT_HEAP_PROFILES set it also
// keeps a heap profile, after a collection of its own, for n streams.
func liveHeap(b *testing.B, addr string, n int) int64 {
	b.Helper()
	body := httpGet(b, "http://"+addr+"/debug/pprof/heap?gc=1&debug=1")
	_, after, ok := strings.Cut(string(body), "\n# HeapAlloc = ")
	if !ok {
		b.Fatal("no HeapAlloc in the heap profile")
	}
	v, _, _ := strings.Cut(after, "\n")
	alloc, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	if dir := os.Getenv("CAST_FANOUT_HEAP_PROFILES"); dir != "" {
		prof := httpGet(b, "http://"+addr+"/debug/pprof/heap?gc=1")
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("heap_n%d.pb.gz", n)), prof, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return alloc
}
