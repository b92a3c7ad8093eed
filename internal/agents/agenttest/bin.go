// Package agenttest runs the real, pinned agent CLIs in tests: it finds them,
// builds an isolated environment per agent pointing at a fake model, and runs
// them with a hard timeout. It is imported by tests and by the tests'
// harness (internal/testharness) only.
package agenttest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cast-dev/cast/internal/agents"

	"github.com/cast-dev/cast/internal/shellcmd"
)

// BinEnv overrides where the CLIs are looked up (a node_modules/.bin folder).
const BinEnv = "CAST_AGENTS_BIN"

// Installable says whether agent's CLI is pinned and installed for the
// tests (a verified agent from npm: not Grok Build, Cursor or Muse), and
// its name in node_modules/.bin. The agent's package must be linked (its
// registry entry is its own).
func Installable(agent string) (binary string, ok bool) {
	a, found := agents.Lookup(agent)
	if !found || !a.Verified || a.NPMPackage == "" {
		return "", false
	}
	return a.Binary, true
}

// Bin returns the absolute path of agent's pinned CLI. A missing CLI fails the
// test rather than skipping it: a silently skipped real-client test proves
// nothing.
func Bin(t testing.TB, agent string) string {
	t.Helper()
	name, ok := Installable(agent)
	if !ok {
		t.Fatalf("agenttest: no installable CLI for agent %q", agent)
	}
	dir := os.Getenv(BinEnv)
	if dir == "" {
		dir = filepath.Join(RepoRoot(t), ".ci", "agents", "node_modules", ".bin")
	}
	p := filepath.Join(dir, name)
	fi, err := os.Stat(p)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("agenttest: %s CLI not found at %s; run `make agents` (or .ci/install-agents.sh)", agent, p)
	}
	return p
}

// RepoRoot walks up from the test's working directory to the folder holding
// go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("agenttest: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("agenttest: no go.mod above the test directory")
		}
		dir = parent
	}
}

// DropResumeCodex installs, in a node_modules folder of its own, a codex
// that reports version (in its package.json, where nodes read versions)
// and wraps the pinned codex, except that `codex exec resume ID` silently
// starts a new thread: a CLI update whose resume drops the history. It
// returns the folder's .bin, which holds the `codex` launcher (put it
// first on PATH).
func DropResumeCodex(t testing.TB, version string) string {
	t.Helper()
	real := Bin(t, "codex")
	mods := filepath.Join(t.TempDir(), "node_modules")
	pkg := filepath.Join(mods, "@openai", "codex")
	script := `#!/bin/bash
# A codex whose resume forgets: "resume ID" is dropped from the arguments.
args=()
while [ $# -gt 0 ]; do
  if [ "$1" = resume ]; then shift 2; continue; fi
  args+=("$1"); shift
done
exec ` + shellcmd.Quote(real) + ` "${args[@]}"
`
	files := map[string]string{
		filepath.Join(pkg, "package.json"):    `{"name":"@openai/codex","version":"` + version + `"}`,
		filepath.Join(pkg, "bin", "codex.js"): script,
	}
	for p, s := range files {
		mkdir(t, filepath.Dir(p))
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(mods, ".bin")
	mkdir(t, bin)
	if err := os.Symlink(filepath.Join("..", "@openai", "codex", "bin", "codex.js"), filepath.Join(bin, "codex")); err != nil {
		t.Fatal(err)
	}
	return bin
}
