package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// promTokens splits a PromQL expression into what matters here: grouping
// clauses, label matchers, ranges, strings and names.
var promTokens = regexp.MustCompile(`(?:by|without|on|ignoring) \([^)]*\)|\{[^}]*\}|\[[^\]]*\]|"[^"]*"|\(|[a-zA-Z_:][a-zA-Z0-9_:]*`)

var promKeywords = []string{"and", "or", "unless", "bool", "offset", "group_left", "group_right"}

// selectsJobAndNamespace is the matcher every series selector of a
// dashboard starts with.
const selectsJobAndNamespace = `{job=~"$job",namespace=~"$namespace"`

// Every dashboard has the namespace and job variables, and every series
// selector of every panel uses both: on a shared Prometheus no panel
// mixes in another install's targets or the cluster's own etcd
// (internal/e2e's TestDashboardsShowData runs the queries against a real
// Prometheus).
func TestDashboardsSelectJobAndNamespace(t *testing.T) {
	files, _ := filepath.Glob("grafana/*.json")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Templating struct{ List []struct{ Name, Type string } }
			Panels     []struct {
				Title   string
				Targets []struct{ Expr string }
			}
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var vars []string
		for _, v := range d.Templating.List {
			vars = append(vars, v.Name)
		}
		if !slices.Contains(vars, "job") || !slices.Contains(vars, "namespace") {
			t.Errorf("%s: variables %v, want job and namespace", f, vars)
		}
		isName := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
		n := 0
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				toks := promTokens.FindAllString(tg.Expr, -1)
				for i, tok := range toks {
					name := isName.MatchString(tok)
					var next string
					if i+1 < len(toks) {
						next = toks[i+1]
					}
					if !name || slices.Contains(promKeywords, tok) || next == "(" || strings.HasPrefix(next, "by (") || strings.HasPrefix(next, "without (") {
						continue // a function or aggregation, a keyword, or not a name
					}
					n++
					if !strings.HasPrefix(next, selectsJobAndNamespace) {
						t.Errorf("%s panel %q: %s does not select $job and $namespace: %s", f, p.Title, tok, tg.Expr)
					}
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: found no series selector", f)
		}
	}
}
