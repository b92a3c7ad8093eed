package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
)

// The user's own agent runs with the user's environment and nothing moved
// (no CLAUDE_CONFIG_DIR, XDG dir or TMPDIR of cast's); an isolated one gets
// every folder under its Home and none of the node's keys.
func TestBuildEnvOwnAndIsolated(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "node-key")
	claude, _ := agents.Lookup("claude")
	user := []string{"HOME=/home/me", "PATH=/usr/bin", "ANTHROPIC_API_KEY=user-key", "CAST_SESSION=stale", "TERM=xterm", "XDG_DATA_HOME=/home/me/data"}
	tests := []struct {
		name string
		turn Turn
		want map[string]string // "" means absent
	}{
		{"own", Turn{Agent: "claude", Home: "/home/me", UserEnv: user, Env: []string{"CAST_SESSION=s1"}}, map[string]string{
			"HOME": "/home/me", "ANTHROPIC_API_KEY": "user-key", "CLAUDE_CONFIG_DIR": "", "TMPDIR": "",
			"XDG_DATA_HOME": "/home/me/data", "XDG_CONFIG_HOME": "", "CAST_SESSION": "s1", "TERM": "dumb", "PATH": "/usr/bin",
		}},
		{"isolated", Turn{Agent: "claude", Home: "/d/agents/claude", Env: []string{"CAST_SESSION=s1"}}, map[string]string{
			"HOME": "/d/agents/claude", "ANTHROPIC_API_KEY": "", "CLAUDE_CONFIG_DIR": "/d/agents/claude/.claude",
			"TMPDIR": "/d/agents/claude/.tmp", "XDG_DATA_HOME": "/d/agents/claude/.local/share", "CAST_SESSION": "s1", "TERM": "dumb",
		}},
	}
	for _, tc := range tests {
		env := buildEnv(claude, tc.turn)
		for k, want := range tc.want {
			if got := EnvValue(env, k); got != want {
				t.Errorf("%s: %s=%q, want %q", tc.name, k, got, want)
			}
		}
		for _, kv := range env {
			if kv == "CAST_SESSION=stale" {
				t.Errorf("%s: the node's own CAST_SESSION leaked in", tc.name)
			}
		}
	}
	if got := (Turn{Agent: "claude", Home: "/home/me", UserEnv: user}).AgentDir(); got != "/home/me/.claude" {
		t.Errorf("own claude dir %q", got)
	}
	if got := (Turn{Agent: "opencode", Home: "/home/me", UserEnv: user}).AgentDir(); got != "/home/me/data" {
		t.Errorf("own opencode dir %q (XDG_DATA_HOME)", got)
	}
	if got := (Turn{Agent: "pi", Home: "/d/pi"}).AgentDir(); !strings.HasSuffix(got, "/d/pi/.pi/agent") {
		t.Errorf("isolated pi dir %q", got)
	}
}

// withoutSelf drops a PATH folder whose `node` is a Go binary of cast's
// module, and sees each version of the file: a script there is kept, the
// same path rewritten as such a binary is dropped, and rewritten back it
// is kept again (its build info is remembered per version, not per path).
func TestWithoutSelfSeesEachVersionOfNode(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(self) // this test binary: built from cast's module
	if err != nil {
		t.Fatal(err)
	}
	dir, other := t.TempDir(), t.TempDir()
	path := dir + string(os.PathListSeparator) + other
	node := filepath.Join(dir, "node")
	script := []byte("#!/bin/sh\nexit 0\n")
	for i, tc := range []struct {
		content []byte
		want    string
	}{
		{script, path},
		{bin, other},
		{append(script, '\n'), path},
	} {
		if err := os.WriteFile(node, tc.content, 0o755); err != nil {
			t.Fatal(err)
		}
		if got := withoutSelf(path); got != tc.want {
			t.Errorf("version %d of %s: withoutSelf = %q, want %q", i, node, got, tc.want)
		}
	}
}

// The CLI's PWD is the turn's folder, not the node's: exec keeps an Env it
// is given as it is, so the node's own PWD (the folder `controlplane --dev`
// was started in) reached the agent, and OpenCode, which files a session
// under $PWD, filed every cast session (and a timed-out probe's) under
// that folder: `opencode session list` in the project never showed them.
func TestBuildEnvPWDIsTheTurnsFolder(t *testing.T) {
	oc, _ := agents.Lookup("opencode")
	user := []string{"HOME=/home/me", "PATH=/usr/bin", "PWD=/where/the/node/started"}
	for _, turn := range []Turn{
		{Agent: "opencode", Home: "/home/me", Cwd: "/src/app", UserEnv: user},
		{Agent: "opencode", Home: "/d/agents/opencode", Cwd: "/src/app"},
	} {
		env := buildEnv(oc, turn)
		var pwds []string
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "PWD="); ok {
				pwds = append(pwds, v)
			}
		}
		if len(pwds) != 1 || pwds[0] != "/src/app" {
			t.Errorf("own env %v: PWD entries %q, want just /src/app", turn.UserEnv != nil, pwds)
		}
	}
}
