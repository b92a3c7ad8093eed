package controlplane_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A real Prometheus (Debian's package; `make debs` installs it) scrapes a
// control plane through a migration: the migration counters reach it, and
// deploy/k8s/base/cast-alerts.rules.yml loads healthy.
func TestPrometheusScrapesMigrations(t *testing.T) {
	t.Parallel()
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
	prom := testharness.StartPrometheus(t, rules, map[string]testharness.ScrapeJob{"cast": {Targets: []string{cp.MetricsAddr()}}})

	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "a"})
	must(t, err)
	m, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "b", SessionIds: []string{sess.Id}, SkipWorktree: true})
	must(t, err)
	if m = waitMigration(t, c, m.Id); m.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		t.Fatalf("migration %v", m.State)
	}
	testharness.WaitFor(t, 90*time.Second, "prometheus to see the moved session", func() bool {
		v, ok := prom.Value(`sum(cast_migration_sessions_total{outcome="succeeded"})`)
		return ok && v >= 1
	})
	testharness.WaitFor(t, 30*time.Second, "the rules loaded and evaluated", func() bool {
		health, err := prom.RuleHealth()
		if err != nil || len(health) != nRules {
			return false
		}
		for _, h := range health {
			if h != "ok" {
				return false
			}
		}
		return true
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
