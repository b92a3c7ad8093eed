package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// resyncSizes are the sessions a node owns in BenchmarkResync: the
// largest two show how the cost grows when the sessions double (issue 25:
// 2x the sessions within 2.2x the time).
var resyncSizes = []int{1000, 10000, 20000}

// BenchmarkResync is the node's side of a reconnect: a node owning N
// sessions is restarted (its state loaded from disk) and handles the
// AssignSession of every one of them, as the control plane streams them
// on its hello, through the same handler a live stream uses; every
// session's worker is woken and finds nothing to run. The control plane's
// side is TestResyncOfTenThousandSessionsStreams. Reported per size: the
// first assignment (every record new, written), the restart's load and
// the resync, each a session, and at the largest size over the one before
// the resync's time (resync_ratio_2x) and the load's and resync's together
// (load_resync_ratio_2x).
//
//	go test -run '^$' -bench Resync -benchtime 1x ./internal/node
func BenchmarkResync(b *testing.B) {
	b.ReportAllocs()
	took, restart := map[int]time.Duration{}, map[int]time.Duration{}
	for range b.N {
		for _, n := range resyncSizes {
			first, load, resync := resyncOnce(b, n)
			took[n] += resync
			restart[n] += load + resync
			b.ReportMetric(float64(first.Microseconds())/float64(n), fmt.Sprintf("assign_us/session_n%d", n))
			b.ReportMetric(float64(load.Microseconds())/float64(n), fmt.Sprintf("load_us/session_n%d", n))
			b.ReportMetric(float64(resync.Microseconds())/float64(n), fmt.Sprintf("resync_us/session_n%d", n))
		}
	}
	last, prev := resyncSizes[len(resyncSizes)-1], resyncSizes[len(resyncSizes)-2]
	b.ReportMetric(float64(took[last])/float64(took[prev]), "resync_ratio_2x")
	b.ReportMetric(float64(restart[last])/float64(restart[prev]), "load_resync_ratio_2x")
}

// TestResyncBenchRuns is BenchmarkResync's short mode in the normal run, so
// the benchmark cannot rot: a few sessions, every phase done (never a
// timing asserted).
func TestResyncBenchRuns(t *testing.T) {
	for _, n := range []int{1, 40} {
		if first, load, resync := resyncOnce(t, n); first <= 0 || load <= 0 || resync <= 0 {
			t.Fatalf("n=%d: phases took %v, %v, %v", n, first, load, resync)
		}
	}
}

// resyncOnce assigns n sessions to a fresh node, restarts it and assigns
// them again; it returns the three phases' times.
func resyncOnce(tb testing.TB, n int) (first, load, resync time.Duration) {
	dir := tb.TempDir()
	cmds := make([]*castv1.Command, n)
	for i := range cmds {
		cmds[i] = &castv1.Command{Kind: &castv1.Command_AssignSession{AssignSession: &castv1.AssignSession{
			OwnerToken: 7,
			Session: &castv1.Session{Id: fmt.Sprintf("s-%06d", i), Agent: "claude", Cwd: "/src/project",
				State: castv1.SessionState_SESSION_STATE_IDLE},
		}}}
	}
	start := time.Now()
	a, stop := resyncDaemon(tb, dir)
	handleAll(tb, a, cmds)
	first = time.Since(start)
	stop()

	start = time.Now()
	a, stop = resyncDaemon(tb, dir)
	load = time.Since(start)
	if got := len(a.st.ids()); got != n {
		tb.Fatalf("the restarted node loaded %d sessions, want %d", got, n)
	}
	start = time.Now()
	handleAll(tb, a, cmds)
	resync = time.Since(start)
	stop()
	return first, load, resync
}

// resyncDaemon is a node daemon with the state in dir and no control
// plane: an assignment of a session with nothing to catch up on needs
// none. stop ends its workers and closes its state.
func resyncDaemon(tb testing.TB, dir string) (a *Daemon, stop func()) {
	st, err := loadState(dir)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a = &Daemon{st: st, lg: zap.NewNop(), runCtx: ctx,
		cfg: Config{ReconnectMin: DefaultReconnectMin, ReconnectMax: DefaultReconnectMax}}
	return a, func() {
		cancel()
		a.workers.wg.Wait()
		st.file.Close()
	}
}

func handleAll(tb testing.TB, a *Daemon, cmds []*castv1.Command) {
	for _, c := range cmds {
		if err := a.handle(a.runCtx, c); err != nil {
			tb.Fatal(err)
		}
	}
}
