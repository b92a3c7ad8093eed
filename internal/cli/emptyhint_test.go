package cli

import (
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/testharness"
)

// With nothing to list, the hint for people goes to stderr: stdout stays
// what a script parses (the table's header, an empty JSON or YAML list,
// nothing for -o name).
func TestEmptyListsKeepStdoutParseable(t *testing.T) {
	srv := testharness.StartControlPlane(t, nil)
	addr := srv.Addr()
	for _, tc := range []struct {
		args         []string
		stdout, hint string
	}{
		{[]string{"account", "ls"}, "AGENT  NAME  ACTIVE  USAGE  LIMITED UNTIL  SWITCHES\n", "no fleet accounts"},
		{[]string{"account", "ls", "-o", "json"}, "{\n  \"accounts\": []\n}\n", ""},
		{[]string{"account", "ls", "-o", "yaml"}, "accounts: []\n", ""},
		{[]string{"usage"}, "", "no fleet accounts"},
		{[]string{"usage", "--json"}, "{\n  \"fleets\": []\n}\n", ""},
		{[]string{"ls"}, "ID  AGENT  NODE  STATE               MSGS  UPDATED  TITLE  NOTE\n", "no sessions yet"},
		// `cast migrate ls` and `cast worktree ls` printed their header
		// alone, with no word for people.
		{[]string{"migrate", "ls"}, "ID  TO  STATE  SESSIONS  STARTED\n", "no migrations yet; start one with `cast migrate start"},
		{[]string{"migrate", "ls", "-o", "json"}, "{\n  \"migrations\": []\n}\n", ""},
		{[]string{"migrate", "ls", "-o", "yaml"}, "migrations: []\n", ""},
		{[]string{"migrate", "ls", "-o", "name"}, "", ""},
		{[]string{"migrate", "ls", "--no-headers"}, "", ""},
		{[]string{"worktree", "ls"}, "NODE  PATH  BRANCH  SESSIONS  AGENT  CHANGES\n", "no worktrees cast made; `cast new --agent A --worktree BRANCH` or `cast fork ID --worktree` makes one"},
		{[]string{"worktree", "ls", "-o", "json"}, "{\n  \"unanswered\": [],\n  \"worktrees\": []\n}\n", ""},
		{[]string{"worktree", "ls", "-o", "yaml"}, "unanswered: []\nworktrees: []\n", ""},
		{[]string{"worktree", "ls", "-o", "name"}, "", ""},
	} {
		out, errOut, code := runMain(t, addr, tc.args...)
		if code != 0 || out != tc.stdout || !strings.Contains(errOut, tc.hint) || (tc.hint == "" && errOut != "") {
			t.Errorf("cast %q: exit %d, stdout %q, stderr %q; want 0, stdout %q, stderr saying %q", tc.args, code, out, errOut, tc.stdout, tc.hint)
		}
	}
}

// `cast migrate status --json` (or -o json|yaml) with no migration yet
// prints an empty object, exit 0, rather than failing: a script reads
// "nothing" as JSON or YAML.
func TestMigrateStatusNoMigrationJSON(t *testing.T) {
	srv := testharness.StartControlPlane(t, nil)
	for _, args := range [][]string{{"--json"}, {"-o", "json"}, {"-o", "yaml"}} {
		out, errOut, code := runMain(t, srv.Addr(), append([]string{"migrate", "status"}, args...)...)
		if code != 0 || out != "{}\n" {
			t.Errorf("migrate status %q: exit %d, stdout %q, stderr %q; want 0 and {}", args, code, out, errOut)
		}
	}
}

// Plain `cast migrate status` (and -o name) with no migration yet is an
// empty answer like an empty list's: the hint for people on stderr,
// nothing on stdout, exit 0 (it failed with "no migrations yet", exit 1).
func TestMigrateStatusNoMigrationHint(t *testing.T) {
	srv := testharness.StartControlPlane(t, nil)
	for _, tc := range []struct {
		args []string
		hint string
	}{
		{nil, "no migrations yet"},
		{[]string{"--follow"}, "no migrations yet"},
		{[]string{"-o", "name"}, ""},
	} {
		out, errOut, code := runMain(t, srv.Addr(), append([]string{"migrate", "status"}, tc.args...)...)
		if code != 0 || out != "" || !strings.Contains(errOut, tc.hint) || (tc.hint == "" && errOut != "") {
			t.Errorf("migrate status %q: exit %d, stdout %q, stderr %q; want 0, no stdout, stderr saying %q", tc.args, code, out, errOut, tc.hint)
		}
	}
}
