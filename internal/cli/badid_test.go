package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// runNowhere runs the CLI against an address nobody answers at, bounded
// so a command that dials and retries cannot hang the test: a mistake
// refused before any request exits 2 at once.
func runNowhere(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := Main(ctx, append([]string{"--addr", "127.0.0.1:1", "--timeout", "2s"}, args...), strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

// What each kind of id a command takes is refused as, before any request.
var (
	badSession = []string{"Bad_ID!", "session ids are 7 to 32 lowercase letters and digits"}
	badNode    = []string{"bad/node", `"bad/node" is malformed`, "use letters, digits, '.', '_' or '-'"}
	badPin     = []string{"sha256:3f1c...", `--ca-pin "sha256:3f1c..." is not a CA pin`, "sha256: and 64 hex digits"}
)

// goodArgs are valid values of the placeholders commands' usage lines
// start with, so a run reaches the flag under test; a command starting
// with one not here fails the test (add it).
var goodArgs = map[string]string{"ID": "abcdefg", "NAME": "work", "PATH": "/tmp/x", "NODE": "n1", "TASK": "hi", "PROMPT...": "hi", "TOOL": "history"}

// idFlags are the flags naming a session, a node or a CA, by the mistake
// a bad value is.
var idFlags = map[string][]string{
	"session": badSession, "parent": badSession, "resume": badSession,
	"node":    badNode,
	"name":    badNode,                                 // token create's owner, node join's node: names alike
	"account": badNode,                                 // handoff's, as account rm's NAME
	"label":   badNode, "to": badNode, "from": badNode, // a node's label or name (migrate start, drain, node ls)
	"ca-pin": badPin, // set-context stored one no call could use; ca said it with exit 1
}

// A malformed session id, node name or CA pin is a usage mistake (exit 2) that
// says what the id looks like, before anything is sent (the address
// answers nothing, so a request would fail otherwise): walked over the
// command tree, so a command added later is checked too. Every command
// taking a session first (the hidden -s flag, no --parent) is given a bad
// one positionally, and every flag naming a session, a node or a CA a bad
// value.
func TestBadIDsRefusedBeforeAnyRPC(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("CAST_SESSION", "")
	root := (&app{}).root()
	type run struct {
		args []string
		want []string
	}
	var runs []run
	for _, c := range allCommands(root) {
		path := strings.Fields(commandKey(c))
		takesSession := c.Flags().Lookup("session") != nil && c.Flags().Lookup("parent") == nil
		var message []string
		if strings.Contains(c.Use, " MESSAGE") && !strings.Contains(c.Use, "[MESSAGE]") {
			message = []string{"hi"} // send: the message is required
		}
		if takesSession {
			runs = append(runs, run{slices.Concat(path, []string{badSession[0]}, message), badSession[1:]})
		}
		for name, bad := range idFlags {
			f := c.LocalFlags().Lookup(name)
			if f == nil || f.Value.Type() != "string" {
				continue
			}
			args := slices.Clone(path)
			if first := firstArg(c); strings.Trim(first, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_.") == "" && first != "" && !(takesSession && name == "session") {
				good, ok := goodArgs[first]
				if !ok {
					t.Fatalf("%s starts with %s: add a valid one to goodArgs", c.CommandPath(), first)
				}
				args = append(args, good)
			} else if takesSession && name != "session" {
				args = append(args, "abcdefg") // an optional [ID] (handoff, merge): outside a session it is needed
			}
			runs = append(runs, run{slices.Concat(args, message, []string{"--" + name, bad[0]}), bad[1:]})
		}
	}
	// Ids given as arguments to commands that take no session.
	for _, args := range [][]string{{"node", "rm", "bad/node"}, {"node", "revoke", "bad/node"}, {"node", "label", "bad/node", "a=b"}, {"drain", "bad/node"},
		{"migrate", "start", "--to", "linux", badSession[0]}} {
		want := badNode[1:]
		if slices.Contains(args, badSession[0]) {
			want = badSession[1:]
		}
		runs = append(runs, run{args, want})
	}
	// Names and migration ids given as arguments.
	badName := []string{"use letters, digits, '.', '_' or '-'"}
	badMigration := []string{`migration id "bad id" is malformed`, "a ULID or UUID"}
	for _, r := range []run{
		{[]string{"migrate", "status", "bad id"}, badMigration}, {[]string{"migrate", "cancel", "bad id"}, badMigration},
		{[]string{"token", "rm", "bad name"}, append([]string{`token name "bad name" is malformed`}, badName...)},
		{[]string{"account", "rm", "bad name", "--agent", "claude"}, append([]string{`account name "bad name" is malformed`}, badName...)},
		{[]string{"account", "use", "bad name", "--agent", "claude"}, append([]string{`account name "bad name" is malformed`}, badName...)},
		{[]string{"account", "add", "bad name", "--agent", "claude", "--credentials", "-"}, append([]string{`account name "bad name" is malformed`}, badName...)},
	} {
		runs = append(runs, r)
	}
	if len(runs) < 25 {
		t.Fatalf("only %d runs: the walk found too few commands", len(runs))
	}
	for _, r := range runs {
		out, errOut, code := runNowhere(t, r.args...)
		if code != 2 || !saysAll(errOut, r.want) || out != "" {
			t.Errorf("cast %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(r.args, " "), code, out, errOut, r.want)
		}
	}
}

// A file a flag names that is not there is a usage mistake (exit 2) that
// names the flag, as a missing --cwd or --from-home folder is, on every
// command whose usage line takes a FILE after a flag (walked, so a new
// one is checked); not an exit 1 in os.Open's words ("open x: no such
// file or directory", without the flag). --out is written, not read.
func TestMissingFlagFileIsAUsageMistake(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	missing := filepath.Join(t.TempDir(), "missing")
	present := filepath.Join(t.TempDir(), "present")
	if err := os.WriteFile(present, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, c := range allCommands((&app{}).root()) {
		words := strings.Fields(strings.NewReplacer("[", " ", "]", " ", "(", " ", ")", " ", "|", " ").Replace(c.Use))
		for i := 1; i < len(words); i++ {
			name, ok := strings.CutPrefix(words[i-1], "--")
			if !ok || words[i] != "FILE" || name == "out" {
				continue
			}
			args := strings.Fields(commandKey(c))
			if first := firstArg(c); strings.Trim(first, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_.") == "" && first != "" {
				args = append(args, goodArgs[first])
			}
			args = append(args, "--"+name, missing)
			switch commandKey(c) {
			case "account add":
				args = append(args, "--agent", "claude")
			case "ca rotate": // --cert and --key go together
				other := map[string]string{"cert": "key", "key": "cert"}[name]
				args = append(args, "--"+other, present)
			case "config set-context":
				args = append(args, "--addr", "127.0.0.1:1")
			}
			runs++
			_, errOut, code := runNowhere(t, args...)
			if code != 2 || !strings.Contains(errOut, "--"+name+" "+missing+": no such file") {
				t.Errorf("cast %s: exit %d, %q; want 2 naming --%s", strings.Join(args, " "), code, errOut, name)
			}
		}
	}
	if runs < 5 {
		t.Fatalf("only %d flags taking a FILE", runs)
	}
	// So is import's PATH, the one FILE given as an argument.
	if _, errOut, code := runNowhere(t, "import", "--agent", "claude", missing); code != 2 || !strings.Contains(errOut, "PATH "+missing+": no such file") {
		t.Errorf("cast import of a missing file: exit %d, %q; want 2 naming PATH", code, errOut)
	}
}
