package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Help renders a flag's value name from back-quoted text in its usage
// (pflag.UnquoteUsage): a bool flag must show none, and no flag may show a
// phrase (`--detach` once read "--detach cast migrate status ID").
func TestFlagHelpValueNames(t *testing.T) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			name, _ := pflag.UnquoteUsage(f)
			if f.Value.Type() == "bool" && name != "" {
				t.Errorf("%s --%s is a bool flag but its help shows a value %q", c.CommandPath(), f.Name, name)
			}
			if strings.ContainsAny(name, " \t") {
				t.Errorf("%s --%s shows the phrase %q as its value name", c.CommandPath(), f.Name, name)
			}
		}
		c.LocalFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk((&app{}).root())
}

// A followed migration's progress goes to stderr; stdout is left for the
// result scripts read.
func TestMigrationProgressOnStderr(t *testing.T) {
	var out, errOut bytes.Buffer
	a := &app{out: &out, errOut: &errOut, addr: "127.0.0.1:1"}
	m := &castv1.Migration{Id: "m1", State: castv1.MigrationState_MIGRATION_STATE_SUCCEEDED, Sessions: []*castv1.MigrationSession{
		{SessionId: "sess001", State: castv1.MigrationState_MIGRATION_STATE_SUCCEEDED},
		{SessionId: "sess002", State: castv1.MigrationState_MIGRATION_STATE_FAILED, Reason: "gone"},
	}}
	if _, err := a.followMigration(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("progress on stdout: %q", out.String())
	}
	if !strings.Contains(errOut.String(), "sess001: succeeded") || !strings.Contains(errOut.String(), "sess002: failed (gone)") {
		t.Errorf("stderr lacks the per-session progress: %q", errOut.String())
	}
}

// A node is named with --node in every command (handoff's --device is a
// hidden, deprecated alias of it).
func TestNodeFlagName(t *testing.T) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "device" && (f.Deprecated == "" || !f.Hidden) {
				t.Errorf("%s --device: name the node with --node", c.CommandPath())
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk((&app{}).root())
	h, _, _ := (&app{}).root().Find([]string{"handoff"})
	if h.Flags().Lookup("node") == nil {
		t.Errorf("cast handoff has no --node")
	}
}

// Session ids are positional in every command, -s ID kept as an alias.
func TestSessionArg(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flag     string
		args     []string
		rest     int
		fallback string
		id       string
		others   []string
		usage    bool
	}{
		{name: "positional", args: []string{"sess001"}, id: "sess001", others: []string{}},
		{name: "flag", flag: "sess001", id: "sess001"},
		{name: "positional with message", args: []string{"sess001", "hi", "there"}, rest: anyRest, id: "sess001", others: []string{"hi", "there"}},
		{name: "flag with message", flag: "sess001", args: []string{"hi"}, rest: anyRest, id: "sess001", others: []string{"hi"}},
		{name: "positional with range", args: []string{"sess001", "1:2"}, rest: 1, id: "sess001", others: []string{"1:2"}},
		{name: "flag with range", flag: "sess001", args: []string{"1:2"}, rest: 1, id: "sess001", others: []string{"1:2"}},
		{name: "flag and range and more", flag: "sess001", args: []string{"1:2", "x"}, rest: 1, usage: true},
		{name: "both", flag: "sess001", args: []string{"sess002"}, usage: true},
		{name: "fallback", fallback: "sess009", id: "sess009"},
		{name: "positional over fallback", args: []string{"sess001"}, fallback: "sess009", id: "sess001", others: []string{}},
		{name: "none", usage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, others, err := sessionArg(tc.flag, tc.args, tc.rest, tc.fallback, "hint")
			var ue usageError
			if tc.usage {
				if !errors.As(err, &ue) {
					t.Fatalf("got %q %v, want a usage error", id, err)
				}
				return
			}
			if err != nil || id != tc.id || len(others) != len(tc.others) || strings.Join(others, " ") != strings.Join(tc.others, " ") {
				t.Fatalf("got %q %q %v, want %q %q", id, others, err, tc.id, tc.others)
			}
		})
	}
}

// fork and workspace set read `--worktree BRANCH` the same way (one
// helper): the branch after the flag is taken, anything else is a usage
// error naming the command's own help, before a control plane is dialed.
func TestWorktreeBranchArgument(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"fork", "sess001", "extra"}, 2, "unexpected argument \"extra\"; see `cast fork --help`"},
		{[]string{"workspace", "set", "sess001", "--root", "extra"}, 2, "unexpected argument \"extra\"; see `cast workspace set --help`"},
		{[]string{"fork", "sess001", "--worktree", "bad..name"}, 2, "--worktree \"bad..name\" is not a valid branch name"},
		{[]string{"new", "--agent", "claude", "--worktree", "bad..name"}, 2, "--worktree \"bad..name\" is not a valid branch name"},
	} {
		_, errOut, code := runMain(t, "127.0.0.1:1", tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("cast %v: exit %d %q, want %d %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

// A flag value that does not parse is a usage mistake that says what the
// flag takes, not the parser's words (strconv.ParseInt: parsing ...).
func TestFlagValueMistakes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fork", "abcdefg", "--at", "abc"}, `--at takes a whole number, not "abc"`},
		{[]string{"fork", "abcdefg", "--at", "1.5"}, `--at takes a whole number, not "1.5"`},
		{[]string{"watch", "abcdefg", "--from-seq", "x"}, `--from-seq takes a whole number, not "x"`},
		{[]string{"send", "abcdefg", "hi", "--timeout", "abc"}, `--timeout takes a duration such as 30s, 5m or 1h30m, not "abc"`},
		{[]string{"ls", "--json=maybe"}, `--json takes true or false, not "maybe"`},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), tc.args, strings.NewReader(""), &out, &errOut)
		if code != 2 || errOut.String() != "cast: "+tc.want+"\n" || out.Len() != 0 {
			t.Errorf("cast %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, out.String(), errOut.String(), tc.want)
		}
	}
}

// A flag value out of its range is refused before anything is sent, with
// what the flag takes (a --wait of -5s was sent, expired at once, and read
// "the control plane did not answer within 30s"; --timeout 0 read "did not
// answer within 0s").
func TestFlagRangeMistakes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"exec", "--wait", "-5s", "hi"}, "--wait must be more than 0, e.g. 10m"},
		{[]string{"exec", "--wait", "0", "hi"}, "--wait must be more than 0, e.g. 10m"},
		{[]string{"exec", "-j", "0", "hi"}, "-j must be at least 1"},
		{[]string{"exec", "--chain", "-j", "2", "a", "b"}, "--chain runs steps one after another; drop -j"},
		{[]string{"watch", "abcdefg", "--from-seq", "-5"}, "--from-seq must be 0 (only new messages) or a seq (1-based)"},
		{[]string{"ls", "--timeout", "0"}, "--timeout must be more than 0, e.g. 30s"},
		{[]string{"send", "abcdefg", "hi", "--timeout", "-1s"}, "--timeout must be more than 0, e.g. 30s"},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append(tc.args, "--addr", "127.0.0.1:1"), strings.NewReader(""), &out, &errOut)
		if code != 2 || errOut.String() != "cast: "+tc.want+"\n" || out.Len() != 0 {
			t.Errorf("cast %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, out.String(), errOut.String(), tc.want)
		}
	}
}

// A flag name means one thing on every command: one value type and one
// shorthand wherever it appears, and a shorthand stands for one flag name
// (walked over the command tree, so a new command's flags are checked).
// A deprecated name kept for scripts (watch's --from, now --from-seq;
// handoff's --to and --device) is hidden from help and says what to use:
// it is not a meaning anyone is taught, so it is not counted.
func TestFlagNamesOneMeaning(t *testing.T) {
	type use struct{ typ, short, where string }
	byName := map[string]use{}
	byShort := map[string]use{}
	for _, c := range append(allCommands((&app{}).root()), (&app{}).root()) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Deprecated != "" {
				return
			}
			u := use{f.Value.Type(), f.Shorthand, c.CommandPath()}
			if prev, ok := byName[f.Name]; ok && (prev.typ != u.typ || prev.short != u.short) {
				t.Errorf("--%s is %s -%s on %s but %s -%s on %s", f.Name, prev.typ, prev.short, prev.where, u.typ, u.short, u.where)
			}
			byName[f.Name] = u
			if f.Shorthand == "" {
				return
			}
			if prev, ok := byShort[f.Shorthand]; ok && prev.typ != f.Name {
				t.Errorf("-%s is --%s on %s but --%s on %s", f.Shorthand, prev.typ, prev.where, f.Name, u.where)
			}
			byShort[f.Shorthand] = use{typ: f.Name, where: c.CommandPath()}
		})
	}
	if len(byName) < 40 {
		t.Fatalf("walked only %d flag names", len(byName))
	}
}

// Every list command takes the list flags, all of them: an `ls` (or a
// command that binds --no-headers) has -o with the list formats, and -o
// with the list formats comes with --no-headers (listFlags.bind); another
// -o offers the one-object formats (objectOutput), no others.
func TestListCommandsTakeTheListFlags(t *testing.T) {
	lists := 0
	for _, c := range allCommands((&app{}).root()) {
		out, noHeaders := c.LocalFlags().Lookup("output"), c.LocalFlags().Lookup("no-headers")
		listUsage := "output format: " + strings.Join(outputFormats, "|")
		objectUsage := "output format: " + strings.Join(objectFormats, "|")
		dataUsage := "output format: " + strings.Join(dataFormats, "|") + " ("
		switch {
		case c.Name() == "ls" || noHeaders != nil:
			lists++
			if out == nil || noHeaders == nil || !strings.HasPrefix(out.Usage, listUsage) || out.Shorthand != "o" {
				t.Errorf("%s is a list command but lacks -o %s or --no-headers", c.CommandPath(), strings.Join(outputFormats, "|"))
			}
		case out != nil && !strings.HasPrefix(out.Usage, objectUsage) && !strings.HasPrefix(out.Usage, dataUsage):
			t.Errorf("%s -o offers %q: neither the list formats (with --no-headers), the one-object ones nor the data ones", c.CommandPath(), out.Usage)
		}
	}
	if lists < 8 {
		t.Fatalf("found only %d list commands", lists)
	}
}
