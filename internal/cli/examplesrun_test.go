package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every example in every command's --help runs as far as the CLI's own
// checks go: given to the whole CLI (an address nobody answers at, a
// scratch HOME holding the folders and the context the examples name),
// none is a usage mistake (exit 2). TestExamplesParse sees only that the
// flags parse; this catches an example with a wrong -o, an unknown agent,
// a malformed id, a flag of the wrong command or the wrong number of
// arguments. A line's placeholders (PATH, TOKEN, an elided pin, $(...))
// get values of their kind, ~ is the scratch HOME and a pipe into cast
// gives it stdin, as a shell and a reader would. An example that fails
// for want of the control plane says so the one way every command does.
func TestExamplesRun(t *testing.T) {
	home := t.TempDir()
	config := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", config)
	t.Setenv("CAST_SESSION", "abcdefg") // mcp runs inside a session
	for _, env := range []string{"CAST_ADDR", "CAST_CONTEXT", "CAST_TOKEN", "CAST_TOKEN_FILE", "CAST_CA_PIN"} {
		t.Setenv(env, "")
	}
	for _, dir := range []string{".codex", "src/app", ".claude"} {
		if err := os.MkdirAll(filepath.Join(home, dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The files the examples read, so each runs to its request.
	for name, body := range map[string]string{
		".claude/.credentials.json": `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-X","refreshToken":"sk-ant-ort01-X","expiresAt":4102444800000,"scopes":["user:inference"]}}`,
		".codex/auth.json":          `{"tokens":{"access_token":"a","refresh_token":"r","id_token":"i"}}`,
		".work-token":               "cast_EXAMPLETOKEN0123456789abcdef0123456789",
		"new-ca.crt":                "not a certificate",
		"new-ca.key":                "not a key",
		"work-ca.pem":               "not a certificate",
		".claude/projects/-home-me-app/0a1b2c.jsonl":                      "{}\n",
		".claude/projects/-home-me-app/0a1b2c/subagents/agent-a1b2.jsonl": "{}\n",
		"s.json": "{}",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(home, name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(home) // `cast ca rotate --cert new-ca.crt` reads the current folder
	// ~/src/app is a checkout with a commit (`cast new --worktree`).
	checkout := filepath.Join(home, "src", "app")
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	diffGit(t, checkout, nil, "init", "-q")
	diffWrite(t, checkout, "main.go", "package main\n")
	diffGit(t, checkout, nil, "add", "-A")
	diffGit(t, checkout, nil, "commit", "-q", "-m", "first")
	// The context the examples name, logged in before (`cast login` alone
	// reuses its issuer), its issuer on an address nobody answers at.
	// Written again before each example: one (set-context) changes it.
	if err := os.MkdirAll(filepath.Join(config, "cast"), 0o700); err != nil {
		t.Fatal(err)
	}
	const issuer = "https://127.0.0.1:2" // not the control plane's address, which the check below looks for
	contexts := "current-context: work\ncontexts:\n  work:\n    addr: 127.0.0.1:1\n    oidc: {issuer: \"" + issuer + "\", client-id: cast}\n"
	placeholders := map[string]string{
		"PATH":                         checkout,
		"sha256:3f1c...":               "sha256:" + strings.Repeat("3f", 32),
		"https://accounts.example.com": issuer,
	}
	// `cast mcp call` is left out of the unreachable check: its error is
	// the tool's own text, what an agent gets over MCP.
	const unreachable = "cannot reach the control plane at 127.0.0.1:1; start it with `controlplane --dev`, or point --addr / CAST_ADDR at it"
	root := (&app{}).root()
	runs := 0
	for _, c := range append(allCommands(root), root) {
		for _, line := range strings.Split(c.Example, "\n") {
			args, ok := exampleArgs(line)
			if !ok {
				continue
			}
			for i, a := range args {
				switch v, ok := placeholders[a]; {
				case ok:
					args[i] = v
				case strings.HasPrefix(a, "$("):
					args[i] = placeholders["PATH"] // what the substituted command prints
				case strings.HasPrefix(a, "~/"):
					args[i] = home + a[1:]
				}
			}
			stdin := ""
			if strings.Contains(line, "| cast ") {
				stdin = "from the pipe"
			}
			if err := os.WriteFile(filepath.Join(config, "cast", "config.yaml"), []byte(contexts), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			var out, errOut bytes.Buffer
			code := Main(ctx, append([]string{"--addr", "127.0.0.1:1", "--timeout", "2s"}, args...), strings.NewReader(stdin), &out, &errOut)
			cancel()
			runs++
			// `cast version` prints the client's line before it finds no
			// control plane, as kubectl version does.
			if code != 0 && out.Len() > 0 && args[0] != "version" {
				t.Errorf("%s example %q failed (exit %d) but printed on stdout, which scripts read as its result: %q", c.CommandPath(), strings.TrimSpace(line), code, out.String())
			}
			if code == 2 {
				t.Errorf("%s example %q is a usage mistake: %s", c.CommandPath(), strings.TrimSpace(line), strings.TrimSpace(errOut.String()))
			}
			// The address answers nothing: whatever tells of it says it
			// the one way, with what to do (not a dial error's words).
			if strings.Contains(errOut.String(), "127.0.0.1:1") && args[0] != "mcp" && (code != 1 || !strings.Contains(errOut.String(), unreachable)) {
				t.Errorf("%s example %q: exit %d, %q; want 1 and %q", c.CommandPath(), strings.TrimSpace(line), code, errOut.String(), unreachable)
			}
		}
	}
	if runs < 100 {
		t.Fatalf("ran only %d examples", runs)
	}
}
