package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/testharness"
)

// The Grafana dashboards (deploy/grafana) and the alerts show real data: a
// real Prometheus scrapes (over HTTPS, verifying the cluster CA and each
// daemon's fixed name) a control plane and two node processes while the
// real claude and codex CLIs run turns against the fake model: one that
// reports its usage windows, one that waits on a permission prompt, one
// that hits an account's usage limit (the fleet switches accounts), a
// migration to the other node, an agent switch there and a codex turn.
// Then every query of every dashboard panel and variable (template
// variables substituted) and every rule expression (its comparison with a
// threshold left out: the series an alert watches) returns data.
func TestDashboardsShowData(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	rulesFile := filepath.Join(root, "deploy", "k8s", "base", "cast-alerts.rules.yml")
	queries := append(dashboardQueries(t, filepath.Join(root, "deploy", "grafana")), ruleQueries(t, rulesFile)...)

	metricsA, metricsB := freeAddr(t), freeAddr(t)
	r, _, _ := newFleetRigWith(t, func(c *controlplane.Config) {
		c.Fleet.Cooldown = time.Hour
		c.SessionCount = time.Second
		c.TLS.Enabled = true // metrics over HTTPS, as deployed
	})
	r.node.Kill() // again, with its metrics served
	r.nodeArgs = append(r.nodeArgs, "--metrics-listen", metricsA)
	r.startNode()
	startSecondNode(t, r, "b", "--metrics-listen", metricsB, "--ca-pin", r.nodeArgs[indexOf(r.nodeArgs, "--ca-pin")+1])
	// Scraped as deploy/k8s does: HTTPS trusting the CA, the control plane
	// by its name and the nodes by theirs.
	// The job names are the ha overlay's (its ServiceMonitor's Service, its
	// PodMonitor's jobLabel app): dashboards and alerts select them. The
	// embedded etcd's own etcd_* families (served on the control plane's
	// port) stand for the etcd StatefulSet's job.
	prom := testharness.StartPrometheus(t, rulesFile, map[string]testharness.ScrapeJob{
		"cast-controlplane": {Targets: []string{r.metricsAddr}, CAFile: r.caFile, ServerName: pki.ServerName},
		"cast-node":         {Targets: []string{metricsA, metricsB}, CAFile: r.caFile, ServerName: pki.NodeMetricsName},
		"cast-etcd":         {Targets: []string{r.metricsAddr}, CAFile: r.caFile, ServerName: pki.ServerName, Keep: "etcd_.*"},
	})

	// Claude reports half of its 5-hour window used, far from a switch
	// ahead.
	claudeWindow(r, "0.5", "0.5", time.Now().Add(2*time.Hour).Truncate(time.Second))
	settings := filepath.Join(agenttest.NativeHome(r.homes["claude"], "claude"), "settings.json")
	must(t, os.WriteFile(settings, []byte(`{"permissions":{"ask":["Bash(touch:*)"]}}`), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "worker", Cwd: t.TempDir(), Text: "first MARK-D1"})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	watch, err := r.c.Sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: sess.Id})
	must(t, err)
	go func() {
		for _, err := watch.Recv(); err == nil; _, err = watch.Recv() {
		}
	}()

	seq := r.send(sess.Id, "TOOLCALL CMD[touch approved.txt]")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_WAITING_PERMISSION, seq-1)
	_, err = r.c.Sessions.AnswerPermission(ctx, &castv1.AnswerPermissionRequest{SessionId: sess.Id, Allow: true})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)

	r.fake.RejectCredential(fleetTokA, 429)
	seq = r.send(sess.Id, "third MARK-D3")
	waitAnswered(r, sess.Id, "MARK-D3", seq)

	m, err := r.c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "b", SessionIds: []string{sess.Id}, SkipWorktree: true})
	must(t, err)
	testharness.WaitFor(t, time.Minute, "the migration to succeed", func() bool {
		got, err := r.c.Migrations.GetMigration(ctx, &castv1.GetMigrationRequest{Id: m.Id})
		return err == nil && got.State == castv1.MigrationState_MIGRATION_STATE_SUCCEEDED
	})
	_, err = r.c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: sess.Id, Agent: "codex"})
	must(t, err)
	seq = r.send(sess.Id, "fourth MARK-D4")
	waitAnswered(r, sess.Id, "MARK-D4", seq)

	// Prometheus has scraped the whole workload.
	for q, want := range map[string]float64{
		`sum(cast_node_turns_total{outcome="succeeded"})`:                  4,
		`sum(cast_node_turns_total{outcome="rate_limited"})`:               1,
		`count(cast_node_sync_lag_seconds_count > 0)`:                      2, // claude on one node, codex on the other
		`sum(cast_migration_sessions_total{outcome="succeeded"})`:          1,
		`sum(cast_account_limits_total{agent="claude"})`:                   1,
		`sum(cast_account_switches_total{reason="limit"})`:                 1,
		`sum(cast_permission_wait_seconds_count{outcome="allowed"})`:       1,
		`sum(cast_controlplane_watch_streams)`:                             1,
		`max(cast_fleet_usage_percent{agent="claude",window="five_hour"})`: 50,
		`max(cast_sessions{agent="codex",state="idle"})`:                   1,
	} {
		testharness.WaitFor(t, time.Minute, "prometheus to see "+q, func() bool {
			v, ok := prom.Value(q)
			return ok && v >= want
		})
	}
	var empty []string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		// A poll counts only while every target's last scrape worked: a
		// failed one leaves its series stale until the next.
		if v, ok := prom.Value(`min(up)`); (!ok || v < 1) && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond) // polling Prometheus's next scrape
			continue
		}
		empty = empty[:0]
		for _, q := range queries {
			res, err := prom.Query(q.expr)
			if err != nil {
				t.Fatalf("%s: %v", q.where, err)
			}
			if len(res) == 0 {
				empty = append(empty, fmt.Sprintf("%s: %s", q.where, q.expr))
			}
		}
		if len(empty) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond) // polling Prometheus's next evaluation
	}
	for _, e := range empty {
		t.Errorf("no data: %s", e)
	}
	health, err := prom.RuleHealth()
	must(t, err)
	for name, h := range health {
		if h != "ok" {
			t.Errorf("rule %s: health %q", name, h)
		}
	}
}

// startSecondNode runs another node process with claude (on the fleet's
// accounts, as the rig's) and codex, and waits until it is connected.
func startSecondNode(t *testing.T, r *turnRig, name string, args ...string) {
	setups := map[string]map[string]any{}
	for _, a := range []string{"claude", "codex"} {
		home, env := agenttest.NodeEnv(t, a, r.fake.URL)
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") })
		setups[a] = map[string]any{"bin": agenttest.Bin(t, a), "home": home, "env": env}
	}
	cfg := filepath.Join(t.TempDir(), "agents.json")
	b, _ := json.Marshal(setups)
	must(t, os.WriteFile(cfg, b, 0o600))
	testharness.StartProc(t, filepath.Join(testharness.Binaries(t), "node"), append([]string{"--controlplane", r.addr,
		"--data-dir", t.TempDir(), "--name", name, "--agents-config", cfg, "--fleet-accounts"}, args...)...)
	testharness.WaitFor(t, 30*time.Second, name+" connected", func() bool {
		resp, err := r.c.Nodes.ListNodes(context.Background(), &castv1.ListNodesRequest{})
		return err == nil && slices.ContainsFunc(resp.Nodes, func(n *castv1.Node) bool { return n.Name == name && n.Connected })
	})
}

// promQuery is one PromQL expression to check, and where it comes from.
type promQuery struct{ where, expr string }

// Grafana's built-in variables, as a dashboard over the last hour has them.
var grafanaBuiltins = strings.NewReplacer("$__rate_interval", "1m", "${__rate_interval}", "1m",
	"$__interval", "15s", "${__interval}", "15s", "$__range", "1h", "${__range}", "1h")

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// dashboardQueries reads every dashboard in dir: each needs a Prometheus
// datasource variable its panels use; it returns every panel target's and
// query variable's expression with the variables set to "All".
func dashboardQueries(t *testing.T, dir string) []promQuery {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	must(t, err)
	if len(files) < 5 {
		t.Fatalf("%d dashboards in %s, want fleet, sessions, migrations, accounts and store", len(files), dir)
	}
	var out []promQuery
	for _, f := range files {
		var d grafanaDashboard
		b, err := os.ReadFile(f)
		must(t, err)
		must(t, json.Unmarshal(b, &d))
		name := filepath.Base(f)
		pairs := []string{}
		hasDS := false
		for _, v := range d.Templating.List {
			switch v.Type {
			case "datasource":
				hasDS = hasDS || (v.Name == "datasource" && string(v.Query) == `"prometheus"`)
			case "query":
				// A variable's query may use the variables before it.
				q := strings.NewReplacer(pairs...).Replace(v.Definition)
				pairs = append(pairs, "${"+v.Name+"}", v.AllValue, "$"+v.Name, v.AllValue)
				if m := labelValues.FindStringSubmatch(q); m != nil {
					q = fmt.Sprintf("count by (%s) (%s)", m[2], m[1])
				}
				out = append(out, promQuery{name + " variable " + v.Name, q})
			}
		}
		if d.UID == "" || d.Title == "" || !hasDS {
			t.Fatalf("%s: needs a uid, a title and a Prometheus datasource variable named datasource", name)
		}
		vars := strings.NewReplacer(pairs...)
		for _, p := range d.Panels {
			if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
				t.Fatalf("%s panel %q: datasource %q, %d targets", name, p.Title, p.Datasource.UID, len(p.Targets))
			}
			for _, tg := range p.Targets {
				e := grafanaBuiltins.Replace(vars.Replace(tg.Expr))
				if strings.Contains(e, "$") {
					t.Fatalf("%s panel %q: unknown variable in %s", name, p.Title, e)
				}
				out = append(out, promQuery{fmt.Sprintf("%s panel %q %s", name, p.Title, tg.RefID), e})
			}
		}
	}
	return out
}

type grafanaDashboard struct {
	UID, Title string
	Templating struct {
		List []struct {
			Name, Type, Definition, AllValue string
			Query                            json.RawMessage // a string for a datasource variable
		}
	}
	Panels []struct {
		Title      string
		Datasource struct{ UID string }
		Targets    []struct {
			RefID string `json:"refId"`
			Expr  string
		}
	}
}

// ruleQueries is every recording rule's expression and, for every alert,
// each operand of its and/or/unless with the comparison against a
// threshold cut off: the series the alert watches, which must exist before
// its first event.
func ruleQueries(t *testing.T, path string) []promQuery {
	var file struct {
		Groups []struct {
			Rules []struct{ Alert, Record, Expr string }
		}
	}
	b, err := os.ReadFile(path)
	must(t, err)
	must(t, yaml.Unmarshal(b, &file))
	var out []promQuery
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				out = append(out, promQuery{"rule " + r.Record, r.Expr})
				continue
			}
			for _, part := range splitTop(r.Expr, " and ", " or ", " unless ") {
				lhs := splitTop(part, "==", "!=", ">=", "<=", ">", "<")[0]
				// absent(X) watches X, which is there while all is well.
				if x, ok := strings.CutPrefix(strings.TrimSpace(lhs), "absent("); ok {
					lhs = strings.TrimSuffix(x, ")")
				}
				out = append(out, promQuery{"alert " + r.Alert, strings.TrimSpace(lhs)})
			}
		}
	}
	return out
}

// splitTop splits expr at each separator outside brackets and quotes.
func splitTop(expr string, seps ...string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(expr); i++ {
		switch c := expr[i]; {
		case c == '"':
			quoted = !quoted
		case quoted:
		case strings.ContainsRune("({[", rune(c)):
			depth++
		case strings.ContainsRune(")}]", rune(c)):
			depth--
		case depth == 0:
			for _, s := range seps {
				if strings.HasPrefix(expr[i:], s) {
					out = append(out, expr[start:i])
					i += len(s) - 1
					start = i + 1
					break
				}
			}
		}
	}
	return append(out, expr[start:])
}
