package controlplane_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// BenchmarkMigrate moves 1 and 100 idle sessions between two nodes and
// reports the wall time per migration and per session, the control plane's
// own share (the fence and commit txns, from its phase histogram) per
// session, and a raw etcd txn round trip (compare + two puts) measured on
// the same etcd in the same run, with their ratio: machines are noisy,
// ratios are what to compare across runs.
//
//	go test -run '^$' -bench Migrate -benchtime 3x ./internal/controlplane
func BenchmarkMigrate(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) { benchMigrate(b, n) })
	}
}

func benchMigrate(b *testing.B, sessions int) {
	ep := testharness.StartEtcd(b, nil)
	srv := testharness.StartControlPlane(b, func(c *controlplane.Config) { c.EtcdEndpoints, c.DataDir = []string{ep}, "" })
	c := testharness.Dial(b, srv.Addr())
	testharness.StartNode(b, srv.Addr(), "a", nil)
	testharness.StartNode(b, srv.Addr(), "b", nil)
	ctx := context.Background()
	var ids []string
	testharness.WaitFor(b, 20*time.Second, "sessions created", func() bool {
		for len(ids) < sessions {
			s, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "a"})
			if err != nil {
				return false
			}
			ids = append(ids, s.Id)
		}
		return true
	})
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	cpBefore := phaseSeconds(b, srv.MetricsAddr())
	var wall time.Duration
	to := []string{"b", "a"}
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		m, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: to[i%2], SessionIds: ids, MaxParallel: 16, SkipWorktree: true})
		if err != nil {
			b.Fatal(err)
		}
		for m.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
			if m.State == castv1.MigrationState_MIGRATION_STATE_FAILED {
				b.Fatalf("migration failed: %s", m.Reason)
			}
			time.Sleep(2 * time.Millisecond)
			if m, err = c.Migrations.GetMigration(ctx, &castv1.GetMigrationRequest{Id: m.Id}); err != nil {
				b.Fatal(err)
			}
		}
		wall += time.Since(start)
	}
	b.StopTimer()
	cpShare := (phaseSeconds(b, srv.MetricsAddr()) - cpBefore) / float64(b.N*sessions)
	rawTxn := rawTxnSeconds(b, raw, 200)
	perSession := wall.Seconds() / float64(b.N*sessions)
	b.ReportMetric(wall.Seconds()*1000/float64(b.N), "ms/migration")
	b.ReportMetric(perSession*1000, "ms/session")
	b.ReportMetric(cpShare*1000, "fence+commit_ms/session")
	b.ReportMetric(rawTxn*1000, "raw_txn_ms")
	b.ReportMetric(cpShare/rawTxn, "fence+commit_vs_raw_txn")
	// Above 1 once sessions move in parallel (their phases overlap).
	b.ReportMetric(cpShare/perSession, "fence+commit_over_wall")
}

// phaseSeconds scrapes the summed fence and commit phase time.
func phaseSeconds(b *testing.B, addr string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, ph := range []string{"fence", "commit"} {
			if strings.HasPrefix(line, `cast_migration_phase_seconds_sum{phase="`+ph+`"}`) {
				v, err := strconv.ParseFloat(strings.Fields(line)[1], 64)
				if err != nil {
					b.Fatal(err)
				}
				sum += v
			}
		}
	}
	return sum
}

// rawTxnSeconds is the mean of n sequential txns shaped like a fence
// (one compare, two puts) on the same etcd.
func rawTxnSeconds(b *testing.B, cli *clientv3.Client, n int) float64 {
	ctx := context.Background()
	start := time.Now()
	for i := range n {
		k := fmt.Sprintf("/bench-raw/%d", i)
		_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, "x"), clientv3.OpPut(k+"/b", "y")).Commit()
		if err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start).Seconds() / float64(n)
}
