package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fence"
	"github.com/cast-dev/cast/internal/fsutil"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// appendCases are the rows of the append table: writers each appending
// one 512-byte message per call, to a session each or all to one; the
// store_only row calls the store directly (no gRPC, TLS or token check),
// which tells the group commit's cost from the API's; the user row appends
// as a user to the user's own sessions (an admin's calls skip the session
// check and the rate limits; a user's pass both); the paced row offers
// a fixed rate (issue 25: p99 under 20 ms at 1,000 messages/s), its p99
// counted from each call's scheduled start, so falling behind shows.
var appendCases = []appendCase{
	{writers: 1, sessions: 1},
	{writers: 16, sessions: 16},
	{writers: 64, sessions: 64},
	{writers: 64, sessions: 1},
	{writers: 64, sessions: 64, direct: true},
	{writers: 64, sessions: 64, user: true},
	{writers: 64, sessions: 64, rate: 1000},
}

type appendCase struct {
	writers, sessions int
	direct            bool // store.Append in the process, not the API
	user              bool // as a user, to sessions the user created
	rate              int  // calls started per second, spread over the writers (0: as fast as they go)
}

func (c appendCase) String() string {
	name := fmt.Sprintf("writers=%d/sessions=%d", c.writers, c.sessions)
	if c.sessions == 1 && c.writers > 1 {
		name = fmt.Sprintf("writers=%d/shared_session", c.writers)
	}
	if c.direct {
		name += "/store_only"
	}
	if c.user {
		name += "/user"
	}
	if c.rate > 0 {
		name = fmt.Sprintf("paced %d/s, %s", c.rate, name)
	}
	return name
}

// benchMsgBytes is the size of every append and of every raw put.
const benchMsgBytes = 512

// BenchmarkAppend compares AppendMessages through the control plane (gRPC
// over TLS with a bearer token, validation, dense seqs, idempotency keys,
// group commit) with plain etcd puts of the same size at the same
// concurrency, on the same etcd in the same run, and reports the ratio:
// machines are noisy, ratios are what to compare across runs. It prints
// the table in markdown and writes it as JSON to $CAST_BENCH_JSON when set
// (`make bench` does both).
//
//	go test -run '^$' -bench Append -benchtime 5x ./internal/controlplane
func BenchmarkAppend(b *testing.B) {
	rig := newAppendRig(b)
	rows := make([]benchRow, len(appendCases))
	for i, ac := range appendCases {
		b.Run(ac.String(), func(b *testing.B) {
			var r appendResult
			b.ResetTimer()
			for range b.N {
				r.add(rig.measure(b, ac, 512))
			}
			b.StopTimer()
			r.report(b)
			rows[i] = r.row(ac)
		})
	}
	emitTable(b, rows)
}

// TestAppendBenchRows is the benchmark's short mode in the normal test
// run, so it never rots: it asserts that every row is produced, never a
// timing.
func TestAppendBenchRows(t *testing.T) {
	rig := newAppendRig(t)
	var rows []benchRow
	for _, ac := range appendCases {
		var r appendResult
		r.add(rig.measure(t, ac, ac.writers))
		rows = append(rows, r.row(ac))
	}
	md := markdownTable(rows)
	for i, ac := range appendCases {
		row := rows[i]
		if row.Value <= 0 || row.Baseline <= 0 || row.Ratio <= 0 || !strings.Contains(md, row.Name) {
			t.Errorf("row %s: %+v missing from the table:\n%s", ac, row, md)
		}
	}
}

// appendRig is a control plane serving TLS with token auth, over an etcd
// the benchmark also puts to directly, with sessions to append to.
type appendRig struct {
	c        *client.Client
	st       *store.Store // a second replica's store, for the direct row
	raw      *clientv3.Client
	sessions []string
	// user is a user's client and userSessions the user's sessions, for
	// the user row.
	user         *client.Client
	userSessions []string
}

func newAppendRig(tb testing.TB) *appendRig {
	ep := testharness.StartEtcd(tb, func(c *testharness.EtcdConfig) { c.QuotaBytes = 2 << 30 })
	srv := testharness.StartControlPlane(tb, func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir = []string{ep}, ""
		c.Store.QuotaBytes = 2 << 30
		c.TLS.Enabled = true
		c.SecretsKeyFile = filepath.Join(tb.TempDir(), controlplane.SecretsKeyFileName)
		// The user row's limiter runs on every call but never holds the
		// benchmark back.
		c.Limits.Rate, c.Limits.Burst, c.Limits.AppendBytes, c.Limits.AppendBurst = 1e9, 1e9, 1e12, 1e12
	})
	testharness.StartNode(tb, srv.Addr(), "bench", func(c *node.Config) { c.CAPin = srv.CAPin() })
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { raw.Close() })
	rig := &appendRig{c: testharness.DialServer(tb, srv), raw: raw,
		st: testharness.OpenStore(tb, ep, func(c *store.Config) { c.QuotaBytes = 2 << 30 })}
	tok, err := rig.c.Auth.CreateToken(context.Background(), &castv1.CreateTokenRequest{Name: "bench", Role: castv1.Role_ROLE_USER})
	if err != nil {
		tb.Fatal(err)
	}
	if rig.user, err = (client.Context{Addr: srv.Addr(), CAPin: srv.CAPin(), Token: tok.Token}).Dial(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rig.user.Close() })
	most, mostUser := 0, 0
	for _, ac := range appendCases {
		if ac.user {
			mostUser = max(mostUser, ac.sessions)
		} else {
			most = max(most, ac.sessions)
		}
	}
	create := func(c *client.Client, ids *[]string, n int) func() bool {
		return func() bool {
			for len(*ids) < n {
				s, err := c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude"})
				if err != nil {
					return false
				}
				*ids = append(*ids, s.Id)
			}
			return true
		}
	}
	testharness.WaitFor(tb, 60*time.Second, "bench sessions", create(rig.c, &rig.sessions, most))
	testharness.WaitFor(tb, 60*time.Second, "the user's bench sessions", create(rig.user, &rig.userSessions, mostUser))
	return rig
}

// measure runs total appends and then total raw puts, each over
// ac.writers goroutines (writer w appends to session w mod ac.sessions).
func (r *appendRig) measure(tb testing.TB, ac appendCase, total int) appendResult {
	ctx := context.Background()
	text := strings.Repeat("x", benchMsgBytes)
	c, sessions := r.c, r.sessions
	if ac.user {
		c, sessions = r.user, r.userSessions
	}
	viaGRPC := func(w, i int) error {
		_, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sessions[w%ac.sessions],
			Messages: []*castv1.Message{{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Agent: "claude", Text: text}}})
		return err
	}
	if ac.direct {
		viaGRPC = func(w, i int) error {
			_, err := r.st.Append(ctx, r.sessions[w%ac.sessions],
				[]*castv1.Message{{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Agent: "claude", Text: text}}, fence.Guard{})
			return err
		}
	}
	viaEtcd := func(w, i int) error {
		_, err := r.raw.Put(ctx, fmt.Sprintf("/bench/%s/%d", ids.NewClientID(), i), text)
		return err
	}
	var res appendResult
	res.n = total
	p0 := sampleProcess(tb)
	res.app, res.appLat = round(tb, ac.writers, total, ac.rate, viaGRPC)
	p1 := sampleProcess(tb)
	res.raw, res.rawLat = round(tb, ac.writers, total, ac.rate, viaEtcd)
	res.appUse, res.rawUse = p1.sub(p0), sampleProcess(tb).sub(p1)
	return res
}

// processUse is what the whole process (client, control plane and etcd
// all run in it) spent over a phase: CPU per call is steadier than calls
// per second when other jobs share the cores (on a CPU-bound machine
// their ratio is the throughput ratio), and allocations per call hardly
// depend on the load.
type processUse struct {
	cpu            time.Duration
	mallocs, bytes uint64
}

func sampleProcess(tb testing.TB) processUse {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return processUse{cpu: cpuTime(tb, os.Getpid()), mallocs: ms.Mallocs, bytes: ms.TotalAlloc}
}

func (p processUse) sub(o processUse) processUse {
	return processUse{cpu: p.cpu - o.cpu, mallocs: p.mallocs - o.mallocs, bytes: p.bytes - o.bytes}
}

func (p processUse) add(o processUse) processUse {
	return processUse{cpu: p.cpu + o.cpu, mallocs: p.mallocs + o.mallocs, bytes: p.bytes + o.bytes}
}

// appendResult sums the rounds of one row.
type appendResult struct {
	n              int
	app, raw       time.Duration
	appUse, rawUse processUse
	appLat, rawLat []time.Duration
}

func (r *appendResult) add(o appendResult) {
	r.n, r.app, r.raw = r.n+o.n, r.app+o.app, r.raw+o.raw
	r.appUse, r.rawUse = r.appUse.add(o.appUse), r.rawUse.add(o.rawUse)
	r.appLat, r.rawLat = append(r.appLat, o.appLat...), append(r.rawLat, o.rawLat...)
}

func (r *appendResult) rates() (app, raw float64) {
	return float64(r.n) / r.app.Seconds(), float64(r.n) / r.raw.Seconds()
}

func (r *appendResult) report(b *testing.B) {
	app, raw := r.rates()
	b.ReportMetric(app, "appends/s")
	b.ReportMetric(raw, "etcd_puts/s")
	b.ReportMetric(app/raw, "throughput_ratio")
	n := float64(r.n)
	b.ReportMetric(float64(r.appUse.cpu.Microseconds())/n, "cpu_us/append")
	b.ReportMetric(float64(r.rawUse.cpu.Microseconds())/n, "cpu_us/put")
	b.ReportMetric(r.rawUse.cpu.Seconds()/r.appUse.cpu.Seconds(), "cpu_ratio")
	b.ReportMetric(float64(r.appUse.mallocs)/n, "allocs/append")
	b.ReportMetric(float64(r.rawUse.mallocs)/n, "allocs/put")
	b.ReportMetric(float64(r.appUse.bytes)/n/1024, "KiB/append")
	b.ReportMetric(float64(r.rawUse.bytes)/n/1024, "KiB/put")
	b.ReportMetric(ms(pct(r.appLat, 50)), "append_p50_ms")
	b.ReportMetric(ms(pct(r.rawLat, 50)), "etcd_p50_ms")
	b.ReportMetric(ms(pct(r.appLat, 99)), "append_p99_ms")
	b.ReportMetric(ms(pct(r.rawLat, 99)), "etcd_p99_ms")
}

func (r *appendResult) row(ac appendCase) benchRow {
	app, raw := r.rates()
	return benchRow{Name: "appends/s, " + ac.String(), Unit: "appends/s", Value: app, Baseline: raw,
		BaselineName: "raw etcd puts/s", Ratio: app / raw,
		P99ms: ms(pct(r.appLat, 99)), BaselineP99ms: ms(pct(r.rawLat, 99))}
}

// round runs total calls over writers goroutines and returns the wall time
// and each call's latency. With rate > 0 call i is due at start + i/rate
// (an open loop: a writer does not wait for the others), and its latency
// counts from then, so a call that starts late because its writer was
// still busy counts the wait too.
func round(tb testing.TB, writers, total, rate int, call func(w, i int) error) (time.Duration, []time.Duration) {
	lat := make([]time.Duration, total)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += writers {
				t0 := time.Now()
				if rate > 0 {
					t0 = start.Add(time.Duration(i) * time.Second / time.Duration(rate))
					time.Sleep(time.Until(t0)) // the pace of the offered load
				}
				if err := call(w, i); err != nil {
					tb.Error(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	return time.Since(start), lat
}

// benchRow is one figure of `make bench`, beside its baseline measured in
// the same run.
type benchRow struct {
	Name          string  `json:"name"`
	Unit          string  `json:"unit"`
	Value         float64 `json:"value"`
	BaselineName  string  `json:"baseline_name"`
	Baseline      float64 `json:"baseline"`
	Ratio         float64 `json:"ratio"`
	P99ms         float64 `json:"p99_ms"`
	BaselineP99ms float64 `json:"baseline_p99_ms"`
}

func markdownTable(rows []benchRow) string {
	var b strings.Builder
	b.WriteString("| figure | value | baseline | baseline value | ratio | p99 ms | baseline p99 ms |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %.0f | %s | %.0f | %.2f | %.1f | %.1f |\n", r.Name, r.Value, r.BaselineName, r.Baseline, r.Ratio, r.P99ms, r.BaselineP99ms)
	}
	return b.String()
}

// emitted are the rows every benchmark of this run emitted so far: the
// table is theirs together (benchmarks run one after another).
var emitted []benchRow

// emitTable adds rows to the run's table (a row of the same name
// replaced), prints the table as markdown and writes it as JSON to
// $CAST_BENCH_JSON when it is set.
func emitTable(tb testing.TB, rows []benchRow) {
	for _, r := range rows {
		if r.Name == "" {
			continue // not run: -bench picked others
		}
		if i := slices.IndexFunc(emitted, func(e benchRow) bool { return e.Name == r.Name }); i >= 0 {
			emitted[i] = r
		} else {
			emitted = append(emitted, r)
		}
	}
	rows = emitted
	fmt.Printf("\n%s\n", markdownTable(rows))
	path := os.Getenv("CAST_BENCH_JSON")
	if path == "" {
		return
	}
	data, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	if err := fsutil.WriteFileAtomic(path, append(data, '\n'), 0o644); err != nil {
		tb.Fatal(err)
	}
	fmt.Printf("wrote %s\n", path)
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
