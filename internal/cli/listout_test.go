package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// runMain runs the whole CLI in process (root flags, checks and exit
// codes as the binary has them) against addr.
func runMain(t *testing.T, addr string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), append([]string{"--addr", addr}, args...), strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

func mustMain(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, errOut, code := runMain(t, addr, args...)
	if code != 0 {
		t.Fatalf("cast %v: exit %d\n%s", args, code, errOut)
	}
	return out
}

// Every list command, format by format, against a real control plane and
// node: -o json is the API objects (as --json), -o yaml the same objects,
// -o name one id per line, the table's rows with --no-headers are the
// names in the same order, -o wide adds columns. `cast node ls` and
// `cast nodes` print the same.
func TestListOutputFormats(t *testing.T) {
	c, addr := diffRig(t)
	var sessions []string
	for range 2 {
		sessions = append(sessions, historySession(t, c, t.TempDir(), []*castv1.Message{{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "hi"}}).Id)
	}
	slices.Reverse(sessions) // newest first
	mustMain(t, addr, "token", "create", "--role", "user", "--name", "alice")
	cred := filepath.Join(t.TempDir(), ".credentials.json")
	body := fmt.Sprintf(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-LISTACCESS","refreshToken":"sk-ant-ort01-LISTREFRESH","expiresAt":%d,"scopes":["user:inference"]}}`, time.Now().Add(time.Hour).UnixMilli())
	if err := os.WriteFile(cred, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	mustMain(t, addr, "account", "add", "work", "--agent", "claude", "--credentials", cred)

	for _, tc := range []struct {
		cmd    []string
		key    string   // the items' JSON field
		id     string   // each item's id field
		names  []string // what -o name prints, in order ("" entries: any)
		header string   // the table's first column
		wide   string   // a column only -o wide has
	}{
		{[]string{"ls"}, "sessions", "id", sessions, "ID", "CWD"},
		{[]string{"node", "ls"}, "nodes", "name", []string{"n1"}, "NAME", "HOSTNAME"},
		{[]string{"nodes"}, "nodes", "name", []string{"n1"}, "NAME", "HOSTNAME"},
		{[]string{"token", "ls"}, "tokens", "name", nil, "NAME", "AGE"},
		{[]string{"migrate", "ls"}, "migrations", "id", []string{}, "ID", "REASON"},
		{[]string{"account", "ls"}, "accounts", "name", []string{"work"}, "AGENT", "POLICY"},
		{[]string{"worktree", "ls"}, "worktrees", "path", []string{}, "NODE", "CHECKOUT"},
	} {
		t.Run(strings.Join(tc.cmd, "_"), func(t *testing.T) {
			run := func(args ...string) string { return mustMain(t, addr, append(slices.Clone(tc.cmd), args...)...) }
			jsonOut := run("-o", "json")
			var obj map[string]any
			if err := json.Unmarshal([]byte(jsonOut), &obj); err != nil {
				t.Fatalf("-o json is not JSON: %v\n%s", err, jsonOut)
			}
			var ids []string
			for _, it := range asList(t, obj[tc.key]) {
				ids = append(ids, fmt.Sprint(it.(map[string]any)[tc.id]))
			}
			names := tc.names
			if names == nil { // tokens: whatever the control plane holds, alice among them
				if !slices.Contains(ids, "alice") {
					t.Fatalf("-o json lacks alice: %v", ids)
				}
				names = ids
			}
			if strings.Join(ids, ",") != strings.Join(names, ",") {
				t.Fatalf("-o json %s = %v, want %v", tc.key, ids, names)
			}
			var legacy map[string]any
			if err := json.Unmarshal([]byte(mustMain(t, addr, append([]string{"--json"}, tc.cmd...)...)), &legacy); err != nil || len(asList(t, legacy[tc.key])) != len(ids) {
				t.Fatalf("--json differs from -o json: %v %v", err, legacy)
			}

			y, err := yaml.YAMLToJSON([]byte(run("-o", "yaml")))
			if err != nil {
				t.Fatal(err)
			}
			var fromYAML map[string]any
			if err := json.Unmarshal(y, &fromYAML); err != nil || len(asList(t, fromYAML[tc.key])) != len(ids) {
				t.Fatalf("-o yaml: %v %s", err, y)
			}
			if tc.key != "nodes" { // a node's last_seen_time moves between calls
				if a, b := mustJSON(t, obj), mustJSON(t, fromYAML); a != b {
					t.Fatalf("-o yaml is not the -o json objects:\n%s\n%s", a, b)
				}
			}

			if got := lines(run("-o", "name")); strings.Join(got, ",") != strings.Join(names, ",") {
				t.Fatalf("-o name = %q, want %q", got, names)
			}
			rows := lines(run("--no-headers"))
			if len(rows) != len(names) {
				t.Fatalf("--no-headers printed %d rows for %d items: %q", len(rows), len(names), rows)
			}
			for i, r := range rows {
				if f := strings.Fields(r); len(f) == 0 || !slices.Contains(f, names[i]) {
					t.Fatalf("--no-headers row %d does not hold %s: %q", i, names[i], r)
				}
			}
			table, wide := run(), run("-o", "wide")
			if len(names) > 0 || tc.key == "migrations" || tc.key == "worktrees" {
				if h := strings.Fields(lines(table)[0]); h[0] != tc.header || slices.Contains(h, tc.wide) {
					t.Fatalf("table header %q: want %s first, no %s", h, tc.header, tc.wide)
				}
				if h := strings.Fields(lines(wide)[0]); h[0] != tc.header || !slices.Contains(h, tc.wide) {
					t.Fatalf("-o wide header %q lacks %s", h, tc.wide)
				}
			}
		})
	}
	if a, b := mustMain(t, addr, "node", "ls", "-o", "name"), mustMain(t, addr, "nodes", "-o", "name"); a != b {
		t.Fatalf("cast node ls -o name %q, cast nodes -o name %q", a, b)
	}
	// A list field with nothing in it is [] as the listed items are, not
	// null: `jq '.unanswered[]'` fails on null.
	if out := mustMain(t, addr, "worktree", "ls", "-o", "json"); strings.Contains(out, "null") {
		t.Fatalf("cast worktree ls -o json has a null:\n%s", out)
	}
	getOutputFormats(t, addr, sessions[0])
	// A --from-seq past the end is said in the flag's name, not the API's
	// (start_seq), with the seqs that work; --from, the flag's old name
	// (a node on migrate start), still works and says it is deprecated.
	for _, flag := range []string{"--from-seq", "--from"} {
		_, errOut, code := runMain(t, addr, "watch", sessions[0], flag, "99")
		if code != 2 || !saysAll(errOut, []string{"--from-seq 99 is past the end of " + sessions[0], "last seq is 1", "--from-seq 2 at most", "--from-seq 0"}) ||
			strings.Contains(errOut, "start_seq") || strings.Contains(errOut, "deprecated") != (flag == "--from") {
			t.Fatalf("cast watch %s 99: exit %d, %q", flag, code, errOut)
		}
	}
	if a, b := lines(mustMain(t, addr, "node", "ls"))[0], lines(mustMain(t, addr, "nodes"))[0]; a != b {
		t.Fatalf("cast node ls header %q, cast nodes header %q", a, b)
	}
}

// `cast get ID -o json|yaml|name` is kubectl's `get NAME -o yaml`: the
// session object itself (-o json is --json), the same as YAML, its id; -o
// wide has no meaning for one object and is a usage mistake.
func getOutputFormats(t *testing.T, addr, id string) {
	t.Helper()
	asJSON := mustMain(t, addr, "get", id, "-o", "json")
	var obj map[string]any
	if err := json.Unmarshal([]byte(asJSON), &obj); err != nil || obj["id"] != id {
		t.Fatalf("cast get -o json: %v\n%s", err, asJSON)
	}
	var legacy map[string]any
	if err := json.Unmarshal([]byte(mustMain(t, addr, "get", id, "--json")), &legacy); err != nil || mustJSON(t, legacy) != mustJSON(t, obj) {
		t.Fatalf("cast get --json differs from -o json: %v %v", err, legacy)
	}
	y, err := yaml.YAMLToJSON([]byte(mustMain(t, addr, "get", id, "-o", "yaml")))
	var fromYAML map[string]any
	if err != nil || json.Unmarshal(y, &fromYAML) != nil || mustJSON(t, fromYAML) != mustJSON(t, obj) {
		t.Fatalf("cast get -o yaml is not the -o json object: %v\n%s", err, y)
	}
	if got := mustMain(t, addr, "get", id, "-o", "name"); got != id+"\n" {
		t.Fatalf("cast get -o name = %q, want %q", got, id)
	}
	for _, args := range [][]string{{"-o", "wide"}, {"--json", "-o", "yaml"}} {
		if _, errOut, code := runMain(t, addr, append([]string{"get", id}, args...)...); code != 2 || !saysAll(errOut, []string{"json, yaml, name"}) && !saysAll(errOut, []string{"two formats"}) {
			t.Fatalf("cast get %v: exit %d, %q; want 2 naming the formats", args, code, errOut)
		}
	}
}

// A usage mistake on a list command exits 2 with what to use instead,
// before any request (the address here answers nothing): an -o no list
// prints, --json beside another -o, a filter or other value outside its
// known set.
func TestListUsageMistakes(t *testing.T) {
	const nowhere = "127.0.0.1:1"
	lists := [][]string{{"ls"}, {"node", "ls"}, {"nodes"}, {"token", "ls"}, {"migrate", "ls"}, {"account", "ls"}, {"worktree", "ls"}}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-o", "table"}, []string{`-o "table" is not an output format`, "json, yaml, wide, name"}},
		{[]string{"-o", "jsn"}, []string{"json, yaml, wide, name"}},
		{[]string{"--json", "-o", "yaml"}, []string{"--json and -o yaml"}},
	} {
		for _, cmd := range lists {
			args := append(slices.Clone(cmd), tc.args...)
			_, errOut, code := runMain(t, nowhere, args...)
			if code != 2 || !saysAll(errOut, tc.want) {
				t.Errorf("cast %v: exit %d, stderr %q; want 2 and %q", args, code, errOut, tc.want)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"ls", "--agent", "bogus"}, []string{`unknown agent "bogus"`, "known agents:", "claude", "codex"}},
		{[]string{"ls", "--agent", "claud"}, []string{`did you mean "claude"`}},
		{[]string{"ls", "--state", "bogus"}, []string{`--state "bogus" is not a state`, "idle", "failed"}},
		{[]string{"account", "ls", "--agent", "bogus"}, []string{`unknown agent "bogus"`, "known agents:"}},
		{[]string{"usage", "--agent", "bogus"}, []string{`unknown agent "bogus"`}},
		{[]string{"agents", "check", "--agent", "bogus"}, []string{`unknown agent "bogus"`}},
		{[]string{"worktree", "ls", "-o", "bogus"}, []string{"json, yaml, wide, name"}},
		{[]string{"token", "create", "--role", "bogus", "--name", "x"}, []string{"--role (user or admin)"}},
		{[]string{"account", "policy", "work", "bogus", "--agent", "claude"}, []string{"use ask, auto, resume, off or fleet"}},
		{[]string{"mcp", "--tools", "history,bogus"}, []string{`--tools "bogus" is no tool of cast's`, "history, permission"}},
	} {
		_, errOut, code := runMain(t, nowhere, tc.args...)
		if code != 2 || !saysAll(errOut, tc.want) {
			t.Errorf("cast %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// Every command shows examples in its --help.
func TestEveryCommandHasExamples(t *testing.T) {
	root := (&app{}).root()
	seen := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		seen[commandKey(c)] = true
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no Example", c.CommandPath())
		} else if !strings.Contains(c.Example, c.CommandPath()) && c != root {
			t.Errorf("%q's examples do not run it:\n%s", c.CommandPath(), c.Example)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for k := range examples {
		if !seen[k] {
			t.Errorf("examples has %q, which is no command", k)
		}
	}
}

func asList(t *testing.T, v any) []any {
	t.Helper()
	if v == nil {
		return nil // protojson and the JSON encoder print an empty list as []; nil only when absent
	}
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("not a list: %#v", v)
	}
	return l
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func saysAll(s string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// Every example parses: the command it runs exists and takes the flags it
// gives (a renamed flag leaves no stale example behind).
func TestExamplesParse(t *testing.T) {
	root := (&app{}).root()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, line := range strings.Split(c.Example, "\n") {
			args, ok := exampleArgs(line)
			if !ok {
				continue
			}
			cmd, rest, err := root.Find(args)
			if err != nil || cmd == root && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				t.Errorf("%s example %q: no such command (%v)", c.CommandPath(), line, err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s example %q: %v", c.CommandPath(), line, err)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// exampleArgs is the cast command of one example line, split as a shell
// would split it (quotes; a pipe into cast, $(...) and what follows &&, >,
// | or a # comment left out); false when the line runs no cast.
func exampleArgs(line string) ([]string, bool) {
	i := strings.Index(line, "cast ")
	if i < 0 {
		return nil, false
	}
	var args []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range line[i+len("cast "):] {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		args = append(args, cur.String())
	}
	for j, a := range args {
		if a == "&&" || a == ">" || a == "|" || strings.HasPrefix(a, "#") {
			args = args[:j]
			break
		}
	}
	return args, true
}

// `cast agents` takes the list flags too: json and yaml are the recorded
// checks (the API objects), the table and -o name a row per agent version,
// -o wide adds who checked it.
func TestAgentsOutputFormats(t *testing.T) {
	c, addr := diffRig(t)
	check := func(version, capability string, passed bool) *castv1.AgentCheck {
		return &castv1.AgentCheck{Agent: "codex", Version: version, Capability: capability, Passed: passed, Detail: map[bool]string{false: "resume lost turn 2"}[passed]}
	}
	if _, err := c.Agents.RecordAgentChecks(context.Background(), &castv1.RecordAgentChecksRequest{Checks: []*castv1.AgentCheck{
		check("0.172.0", "write", true), check("0.172.0", "resume", false), check("0.180.0", "write", true)}}); err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Checks []map[string]any `json:"checks"`
	}
	if err := json.Unmarshal([]byte(mustMain(t, addr, "agents", "-o", "json")), &obj); err != nil || len(obj.Checks) != 3 {
		t.Fatalf("-o json: %v %+v", err, obj)
	}
	y, err := yaml.YAMLToJSON([]byte(mustMain(t, addr, "agents", "-o", "yaml")))
	if err != nil || !strings.Contains(string(y), `"capability":"resume"`) {
		t.Fatalf("-o yaml: %v %s", err, y)
	}
	if got := lines(mustMain(t, addr, "agents", "-o", "name")); strings.Join(got, ",") != "codex" { // what --agent takes, once for its two versions
		t.Fatalf("-o name = %q", got)
	}
	rows := lines(mustMain(t, addr, "agents", "--no-headers"))
	if len(rows) != 2 || !strings.Contains(rows[0], "FAILED") || strings.Contains(rows[1], "FAILED") {
		t.Fatalf("--no-headers rows: %q", rows)
	}
	table, wide := lines(mustMain(t, addr, "agents")), lines(mustMain(t, addr, "agents", "-o", "wide"))
	if strings.Contains(table[0], "CHECKED BY") || !strings.Contains(wide[0], "CHECKED BY") || !strings.Contains(wide[1], "admin:") {
		t.Fatalf("table header %q, wide %q", table[0], wide[:2])
	}
	if !slices.ContainsFunc(table, func(l string) bool { return strings.Contains(l, "resume lost turn 2") }) {
		t.Fatalf("the table says no reason for the failed check:\n%s", strings.Join(table, "\n"))
	}
}
