package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/testharness"
)

// Every command that prints data takes -o json|yaml, as kubectl's
// version does: --json is on every command (root's persistent flag), so
// every command that runs takes -o offering json and yaml but those that
// print nothing for scripts to read (printsNoData, each with its reason).
// Walked over the tree, so a command added later has -o unless it is
// named there (`cast usage -o json` failed with pflag's "unknown
// shorthand flag").
func TestDataCommandsTakeOutput(t *testing.T) {
	root := (&app{}).root()
	paths := map[string]bool{}
	n := 0
	for _, c := range allCommands(root) {
		path := strings.TrimPrefix(c.CommandPath(), "cast ")
		paths[path] = true
		out := c.LocalFlags().Lookup("output")
		if _, none := printsNoData[path]; none {
			if out != nil {
				t.Errorf("%s has -o but is listed as printing no data", c.CommandPath())
			}
			continue
		}
		if c.HasSubCommands() && !c.HasAvailableLocalFlags() {
			continue // a group alone (`cast token`): it prints its help
		}
		n++
		if out == nil || out.Shorthand != "o" {
			t.Errorf("%s prints data (--json) but takes no -o json|yaml", c.CommandPath())
			continue
		}
		formats := strings.Fields(strings.NewReplacer("output format: ", "", "|", " ", "(", " ").Replace(out.Usage))
		if !slices.Contains(formats, "json") || !slices.Contains(formats, "yaml") {
			t.Errorf("%s -o offers %q: not json and yaml", c.CommandPath(), out.Usage)
		}
	}
	for path := range printsNoData {
		if !paths[path] {
			t.Errorf("printsNoData names %q, which is no command", path)
		}
	}
	if n < 40 {
		t.Fatalf("checked only %d commands", n)
	}
}

// -o json prints what --json does, byte for byte, and -o yaml the same
// document as YAML, on the commands that had --json alone; --json with
// -o yaml asks for two formats (exit 2).
func TestOutputJSONAndYAMLAreJSONsDocument(t *testing.T) {
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.TLS.Enabled = true }) // ca status needs a CA
	t.Setenv("CAST_CA_PIN", srv.CAPin())
	addr := srv.Addr()
	for _, args := range [][]string{
		{"usage"}, {"ca", "status"}, {"token", "whoami"}, {"version"}, {"version", "--client"},
		{"node", "token", "create"},
	} {
		js := mustMain(t, addr, append(args, "--json")...)
		if got := mustMain(t, addr, append(args, "-o", "json")...); got != js && args[len(args)-1] != "create" {
			t.Errorf("cast %s -o json printed %q; --json %q", strings.Join(args, " "), got, js)
		}
		y, err := yaml.YAMLToJSON([]byte(mustMain(t, addr, append(args, "-o", "yaml")...)))
		var fromYAML, fromJSON map[string]any
		if err == nil {
			err = json.Unmarshal(y, &fromYAML)
		}
		if err != nil || json.Unmarshal([]byte(js), &fromJSON) != nil || !sameKeys(fromYAML, fromJSON) {
			t.Errorf("cast %s -o yaml: %v, %s; --json %s", strings.Join(args, " "), err, y, js)
		}
		if _, errOut, code := runMain(t, addr, append(args, "--json", "-o", "yaml")...); code != 2 || !strings.Contains(errOut, "two formats") {
			t.Errorf("cast %s --json -o yaml: exit %d, %q; want 2 (two formats)", strings.Join(args, " "), code, errOut)
		}
	}
}

// sameKeys says whether a and b have the same top-level fields (a join
// token's value differs from one run to the next; its fields do not).
func sameKeys(a, b map[string]any) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// Under -o yaml a command that prints several documents (cast exec -j,
// cast watch) prints a YAML stream: --- between them, none before the
// first, so one document is what -o yaml of one answer is.
func TestYAMLOutputIsAStream(t *testing.T) {
	var out strings.Builder
	a := &app{out: &out, json: true, yaml: true}
	for _, v := range []any{map[string]int{"a": 1}, map[string]int{"a": 2}} {
		if err := a.printJSON(v); err != nil {
			t.Fatal(err)
		}
	}
	if out.String() != "a: 1\n---\na: 2\n" {
		t.Errorf("two documents as %q", out.String())
	}
}
