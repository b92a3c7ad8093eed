package controlplane_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A real Prometheus (Debian's package; `make debs` installs it) scrapes a
// control plane through a migration: the migration counters reach it, and
// deploy/k8s/base/cast-alerts.rules.yml loads healthy.
func TestPrometheusScrapesMigrations(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed; run `make debs` (Debian package prometheus)")
	}
	rules := filepath.Join(testharness.RepoRoot(t), "deploy", "k8s", "base", "cast-alerts.rules.yml") // promtool: TestAlertRules
	src, err := os.ReadFile(rules)
	must(t, err)
	nRules := len(regexp.MustCompile(`(?m)^\s*- (alert|record):`).FindAll(src, -1))
	cp := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, cp.Addr())
	testharness.StartNode(t, cp.Addr(), "a", nil)
	testharness.StartNode(t, cp.Addr(), "b", nil)
	waitConnected(t, c, "a", true)
	waitConnected(t, c, "b", true)

	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [%q]\n"+
		"scrape_configs:\n  - job_name: cast\n    static_configs:\n      - targets: [%q]\n", rules, cp.MetricsAddr())
	must(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600))
	web := freeLoopback(t)
	testharness.StartProc(t, promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+web)

	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "a"})
	must(t, err)
	m, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "b", SessionIds: []string{sess.Id}, SkipWorktree: true})
	must(t, err)
	if m = waitMigration(t, c, m.Id); m.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		t.Fatalf("migration %v", m.State)
	}
	testharness.WaitFor(t, 90*time.Second, "prometheus to see the moved session", func() bool {
		v, ok := promQuery(web, `sum(cast_migration_sessions_total{outcome="succeeded"})`)
		return ok && v >= 1
	})
	testharness.WaitFor(t, 30*time.Second, "the rules loaded and evaluated", func() bool {
		var resp struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name, Health string
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := getJSON("http://"+web+"/api/v1/rules", &resp); err != nil || len(resp.Data.Groups) != 1 {
			return false
		}
		for _, r := range resp.Data.Groups[0].Rules {
			if r.Health != "ok" {
				return false
			}
		}
		return len(resp.Data.Groups[0].Rules) == nRules
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func freeLoopback(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().String()
}

func getJSON(u string, v any) error {
	cl := http.Client{Timeout: 3 * time.Second}
	resp, err := cl.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// promQuery returns the value of a scalar-like instant query.
func promQuery(addr, q string) (float64, bool) {
	var resp struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := getJSON("http://"+addr+"/api/v1/query?query="+url.QueryEscape(q), &resp); err != nil || len(resp.Data.Result) == 0 {
		return 0, false
	}
	s, _ := resp.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}
