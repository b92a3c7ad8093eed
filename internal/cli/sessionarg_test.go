package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// sessionCommands are the commands that take a session id: the first
// word of their usage line names it.
func sessionCommands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, c := range allCommands(root) {
		if c.Parent() != nil && c.Parent().Name() == "migrate" {
			continue // migrate's IDs are migrations'
		}
		if arg := firstArg(c); arg == "ID" || arg == "[ID]" || arg == "[FORK_ID]" || c.Flags().Lookup("parent") != nil {
			out = append(out, c)
		}
	}
	return out
}

// Every command that takes a session id has -s/--session as a hidden
// alias, and no other command has a --session flag.
func TestSessionFlagEverywhere(t *testing.T) {
	root := (&app{}).root()
	with := sessionCommands(root)
	if len(with) < 16 {
		t.Fatalf("found %d commands taking a session id, want at least 16", len(with))
	}
	for _, c := range allCommands(root) {
		f := c.Flags().Lookup("session")
		switch {
		case slices.Contains(with, c) && (f == nil || f.Shorthand != "s" || !f.Hidden):
			t.Errorf("%s: takes a session id but has no hidden -s/--session alias", c.CommandPath())
		case !slices.Contains(with, c) && f != nil:
			t.Errorf("%s: has --session but takes no session id", c.CommandPath())
		}
	}
}

// Command by command against a real control plane: the session as an
// argument and as -s ID give the same result, and neither is a usage
// error (exit 2), which naming no session is.
func TestSessionPositionalAndAlias(t *testing.T) {
	c, addr := diffRig(t)
	hist := []*castv1.Message{{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "hi"}}
	newSession := func() string { return historySession(t, c, t.TempDir(), hist).Id }
	home := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string // "ID" is replaced by the session
		same bool     // the two forms print the same stdout
		none int      // exit code with no session named
	}{
		{"get", []string{"get", "ID", "--json"}, true, 2},
		{"read", []string{"read", "ID", "1:1"}, true, 2}, // read 1:1: 1:1 cannot be a session id
		{"diff", []string{"diff", "ID", "--json"}, true, 2},
		{"interrupt", []string{"interrupt", "ID", "--json"}, true, 2},
		{"approve", []string{"approve", "ID"}, true, 2},
		{"deny", []string{"deny", "ID", "-m", "no"}, true, 2},
		{"switch", []string{"switch", "ID", "--model", "m1"}, true, 2},
		{"fork", []string{"fork", "ID", "--json"}, false, 2},
		{"send", []string{"send", "ID", "hello"}, false, 2},
		{"export", []string{"export", "ID", "--agent", "claude", "--home", home, "--cwd", home}, false, 2},
		{"workspace set", []string{"workspace", "set", "ID", "--root"}, true, 2},
		{"handoff", []string{"handoff", "ID", "--agent", "same", "--dry-run"}, false, 2},
		{"merge", []string{"merge", "ID"}, false, 2},
		{"spawn", []string{"spawn", "--subagent", "--agent", "claude", "--parent", "ID", "task"}, false, 2},
		{"rm", []string{"rm", "ID"}, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CAST_SESSION", "")
			id := newSession()
			if tc.name == "merge" {
				id = mustMain(t, addr, "fork", newSession(), "--json")
				id = jsonField(t, id, "id")
			}
			positional := slices.Clone(tc.args)
			flag := slices.Clone(tc.args)
			i := slices.Index(tc.args, "ID")
			positional[i] = id
			flag = slices.Replace(flag, i, i+1, "-s", id)
			if tc.name == "spawn" {
				flag = slices.Replace(slices.Clone(tc.args), i-1, i+1, "-s", id)
			}
			out1, err1, code1 := runMain(t, addr, positional...)
			if tc.name == "merge" || tc.name == "rm" || tc.name == "fork" || tc.name == "handoff" {
				id2 := newSession()
				if tc.name == "merge" {
					id2 = jsonField(t, mustMain(t, addr, "fork", newSession(), "--json"), "id")
				}
				flag[slices.Index(flag, id)] = id2
				out1 = strings.ReplaceAll(out1, id, id2)
			}
			out2, err2, code2 := runMain(t, addr, flag...)
			if code1 == 2 || code2 == 2 || code1 != code2 {
				t.Fatalf("cast %v: exit %d %q; cast %v: exit %d %q", positional, code1, err1, flag, code2, err2)
			}
			if tc.same && out1 != out2 {
				t.Errorf("cast %v printed %q, cast %v printed %q", positional, out1, flag, out2)
			}
			if _, errOut, code := runMain(t, addr, slices.Delete(slices.Clone(tc.args), i, i+1)...); code != tc.none {
				t.Errorf("cast %v with no session: exit %d %q, want %d", tc.args, code, errOut, tc.none)
			}
			if tc.name == "send" || tc.name == "merge" || tc.name == "spawn" {
				return // their other arguments are a message of any length
			}
			if _, errOut, code := runMain(t, addr, slices.Replace(slices.Clone(flag), slices.Index(flag, "-s"), slices.Index(flag, "-s"), "x1", "x2")...); code != 2 {
				t.Errorf("cast %v with extra arguments: exit %d %q, want 2", flag, code, errOut)
			}
		})
	}
}

// jsonField is a string field of the JSON object out.
func jsonField(t *testing.T, out, field string) string {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	v, _ := obj[field].(string)
	if v == "" {
		t.Fatalf("no %q in %s", field, out)
	}
	return v
}

// One meaning per flag name: --to names a node (migrate start, drain);
// handoff names its agent with --agent, as switch and fork do, and its old
// --to still works, hidden, with a one-line deprecation note on stderr.
func TestHandoffAgentFlag(t *testing.T) {
	for _, c := range allCommands((&app{}).root()) {
		if f := c.Flags().Lookup("to"); f != nil && f.Deprecated == "" && !strings.Contains(f.Usage, "node") {
			t.Errorf("%s --to: %q does not name a node", c.CommandPath(), f.Usage)
		}
	}
	c, addr := diffRig(t)
	id := historySession(t, c, t.TempDir(), []*castv1.Message{{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "hi"}}).Id
	for _, tc := range []struct {
		flag       string
		deprecated bool
	}{{"--agent", false}, {"--to", true}} {
		t.Run(tc.flag, func(t *testing.T) {
			out, errOut, code := runMain(t, addr, "handoff", id, tc.flag, "same", "--dry-run")
			if code != 0 || !strings.Contains(out, "hi") || strings.Contains(out, "deprecated") {
				t.Fatalf("handoff %s same --dry-run: exit %d %q %q", tc.flag, code, out, errOut)
			}
			note := strings.Contains(errOut, "--to has been deprecated, use --agent")
			if note != tc.deprecated || strings.Count(errOut, "\n") > 1 {
				t.Errorf("handoff %s: stderr %q, deprecation note wanted: %v", tc.flag, errOut, tc.deprecated)
			}
		})
	}
	if _, errOut, code := runMain(t, addr, "handoff", id, "--dry-run"); code != 2 || !strings.Contains(errOut, "--agent AGENT") {
		t.Errorf("handoff without an agent: exit %d %q", code, errOut)
	}
}

// An export or restore whose temporary folder cannot hold the spooled
// session fails saying where it was kept and what to set, before it
// writes anything.
func TestExportSpoolErrorSaysWhatToDo(t *testing.T) {
	c, addr := diffRig(t)
	id := historySession(t, c, t.TempDir(), []*castv1.Message{{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "hi"}}).Id
	missing := filepath.Join(t.TempDir(), "gone")
	t.Setenv("TMPDIR", missing)
	home := t.TempDir()
	for _, args := range [][]string{
		{"export", id, "--agent", "claude", "--home", home, "--cwd", home},
		{"restore", id, "--home", home},
	} {
		_, errOut, code := runMain(t, addr, args...)
		if code == 0 || !strings.Contains(errOut, "set TMPDIR") || !strings.Contains(errOut, missing) {
			t.Errorf("cast %s with TMPDIR missing: exit %d, stderr %q", args[0], code, errOut)
		}
		if entries, _ := os.ReadDir(home); len(entries) != 0 {
			t.Errorf("cast %s wrote %d entries into the agent's home before failing", args[0], len(entries))
		}
	}
}
