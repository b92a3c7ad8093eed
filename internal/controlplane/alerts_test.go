package controlplane_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cast-dev/cast/internal/testharness"
)

const runbooks = "https://github.com/cast-dev/cast/blob/main/docs/runbooks.md#"

// Every alert has a summary, a description, a `for:` and a runbook_url
// whose anchor is a section of docs/runbooks.md; promtool checks the rules
// and runs their unit tests (cast-alerts.test.yml: the migration alerts
// fire on a replica's first event, near-quota at 80%).
func TestAlertRules(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	rules := filepath.Join(root, "deploy", "k8s", "base", "cast-alerts.rules.yml")
	if out, err := exec.Command("promtool", "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := exec.Command("promtool", "test", "rules", filepath.Join(filepath.Dir(rules), "cast-alerts.test.yml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				For         string            `yaml:"for"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	src, err := os.ReadFile(rules)
	must(t, err)
	must(t, yaml.Unmarshal(src, &file))
	doc, err := os.ReadFile(filepath.Join(root, "docs", "runbooks.md"))
	must(t, err)
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			anchors[strings.ToLower(strings.TrimSpace(h))] = true
		}
	}
	n := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if r.For == "" {
				t.Errorf("%s has no for:", r.Alert)
			}
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[k] == "" {
					t.Errorf("%s has no %s", r.Alert, k)
				}
			}
			if want := runbooks + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !anchors[strings.ToLower(r.Alert)] {
				t.Errorf("docs/runbooks.md has no section ## %s", r.Alert)
			}
		}
	}
	if n < 7 {
		t.Fatalf("found %d alerts; the rules file did not parse as expected", n)
	}
}

// /metrics passes `promtool check metrics` (embedded etcd's families that
// the linter refuses are left out; /metrics/etcd has them all) and carries
// the migration, session, permission and fleet series at 0 before any
// event, so alerts see the first.
func TestMetricsPassPromtool(t *testing.T) {
	t.Parallel()
	cp := testharness.StartControlPlane(t, nil)
	var body []byte
	testharness.WaitFor(t, 30*time.Second, "the store's first size poll", func() bool {
		body = httpGet(t, "http://"+cp.MetricsAddr()+"/metrics")
		return bytes.Contains(body, []byte("\ncast_store_backend_quota_bytes 2.68435456e+08\n"))
	})
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	for _, want := range []string{
		`cast_migration_sessions_total{outcome="failed"} 0`, `cast_migration_sessions_total{outcome="succeeded"} 0`,
		`cast_migration_sessions_total{outcome="cancelled"} 0`,
		`cast_migration_phase_seconds_count{phase="fence"} 0`, `cast_migration_phase_seconds_count{phase="drain"} 0`,
		`cast_migration_phase_seconds_count{phase="worktree"} 0`, `cast_migration_phase_seconds_count{phase="commit"} 0`,
		`cast_build_info{capability_version=`, "\netcd_server_has_leader ",
		`cast_sessions{agent="claude",state="waiting_permission"} 0`, `cast_permission_wait_seconds_count{outcome="abandoned"} 0`,
		`cast_account_limits_total{agent="claude"} 0`, `cast_fleet_accounts{agent="claude",state="limited"} 0`,
		"\ncast_controlplane_watch_streams 0\n", `cast_store_owner_write_rejected_total{reason="fenced"} 0`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	all := httpGet(t, "http://"+cp.MetricsAddr()+"/metrics/etcd")
	if !bytes.Contains(all, []byte("\netcd_server_has_leader ")) || bytes.Contains(all, []byte("\ncast_")) {
		t.Errorf("/metrics/etcd should hold etcd's families only:\n%.2000s", all)
	}
}

func httpGet(t testing.TB, u string) []byte {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
