package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A context that is not there is one mistake, said one way with one exit
// code (2, a usage mistake: a name given that names nothing) by every
// command, whether it only calls the control plane through the context
// (`cast ls`), writes into it (`cast login`, `cast token cert`) or edits
// the file (`cast config use-context`). Walked over the command tree: any
// command that tells of the missing context must say exactly this.
func TestNoContextOneMessage(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("HOME", t.TempDir())
	for _, env := range []string{"CAST_ADDR", "CAST_CONTEXT", "CAST_TOKEN", "CAST_TOKEN_FILE", "CAST_SESSION"} {
		t.Setenv(env, "")
	}
	path := filepath.Join(dir, "cast", "config.yaml")

	// No contexts at all: the commands that need one say how to make one.
	none := "no context in " + path + "; `cast config set-context NAME --addr HOST:PORT` makes one (controlplane --dev writes one)"
	for _, args := range [][]string{{"login"}, {"token", "cert"}} {
		if _, errOut, code := runNowhere(t, args...); code != 2 || errOut != "cast: "+none+"\n" {
			t.Errorf("cast %s with no contexts: exit %d, %q; want 2 and %q", strings.Join(args, " "), code, errOut, none)
		}
	}

	// Contexts, none current (and CAST_CONTEXT names none).
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("contexts:\n  dev: {addr: 127.0.0.1:1}\n  work: {addr: 127.0.0.1:1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	unnamed := "no current context in " + path + "; name one with --context NAME (it has dev, work) or `cast config use-context NAME`"
	for _, args := range [][]string{{"login"}, {"token", "cert"}} {
		if _, errOut, code := runNowhere(t, args...); code != 2 || errOut != "cast: "+unnamed+"\n" {
			t.Errorf("cast %s with no current context: exit %d, %q; want 2 and %q", strings.Join(args, " "), code, errOut, unnamed)
		}
	}

	want := `no context "nope" in ` + path + "; it has dev, work"
	// The commands known to read the context: each must tell of it.
	told := map[string]bool{"ls": false, "login": false, "token cert": false, "config use-context": false, "config get-contexts": false}
	root := (&app{}).root()
	for _, c := range allCommands(root) {
		if !c.Runnable() || c.HasSubCommands() {
			continue
		}
		key := commandKey(c)
		switch key {
		case "web", "mcp", "node join", "completion bash", "completion zsh", "completion fish", "completion powershell":
			continue // a browser, a stdio server, a node's own state, a script: none reads a context by name
		}
		args := strings.Fields(key)
		switch key {
		case "config use-context", "config get-contexts":
			args = append(args, "nope")
		default:
			if first := firstArg(c); strings.Trim(first, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_.") == "" && first != "" {
				good, ok := goodArgs[first]
				if !ok {
					t.Fatalf("%s starts with %s: add a valid one to goodArgs", c.CommandPath(), first)
				}
				args = append(args, good)
			}
			args = append([]string{"--context", "nope"}, args...)
		}
		out, errOut, code := runNowhere(t, args...)
		if !strings.Contains(errOut, "no context") {
			if _, known := told[key]; known {
				t.Errorf("cast %s: exit %d, %q; want it to say %q", strings.Join(args, " "), code, errOut, want)
			}
			continue
		}
		told[key] = true
		if code != 2 || errOut != "cast: "+want+"\n" || out != "" {
			t.Errorf("cast %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(args, " "), code, out, errOut, want)
		}
	}
	for key, ok := range told {
		if !ok {
			t.Errorf("cast %s was not run", key)
		}
	}
}
