package agenttest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
)

// TestVersions runs every pinned CLI's --version in its isolated environment:
// it proves the install, the lookup and that nothing needs the real HOME.
func TestVersions(t *testing.T) {
	tests := []struct {
		agent, want string
	}{
		{"claude", "2.1.197"},
		{"codex", "0.171.0"},
		{"gemini", "0.61.0"},
		{"pi", "0.73.1"},
		{"opencode", "1.18.33"},
	}
	for _, tc := range tests {
		t.Run(tc.agent, func(t *testing.T) {
			t.Parallel()
			bin := Bin(t, tc.agent)
			home, env := Env(t, tc.agent, "http://127.0.0.1:9")
			if got := agents.EnvValue(env, "HOME"); got != home {
				t.Fatalf("HOME = %q, want %q", got, home)
			}
			res := MustRun(t, context.Background(), bin, []string{"--version"}, env, home)
			if !strings.Contains(res.Stdout+res.Stderr, tc.want) {
				t.Fatalf("%s --version = %q, want it to mention %s", tc.agent, res.Stdout, tc.want)
			}
		})
	}
}

func TestEnvIsolated(t *testing.T) {
	for _, agent := range []string{"claude", "codex", "gemini", "pi", "opencode", "grok"} {
		t.Run(agent, func(t *testing.T) {
			home, env := Env(t, agent, "http://127.0.0.1:1234/")
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				if strings.HasSuffix(k, "_HOME") || strings.HasSuffix(k, "_DIR") || k == "HOME" || k == "TMPDIR" {
					if !strings.HasPrefix(v, filepath.Dir(home)) {
						t.Errorf("%s=%s is outside the test's temp dir", k, v)
					}
				}
				if strings.Contains(v, "http://") && !strings.HasPrefix(v, "http://127.0.0.1:1234") {
					t.Errorf("%s=%s does not point at the fake", k, v)
				}
			}
			if nh := NativeHome(home, agent); nh == "" || !strings.HasPrefix(nh, home) {
				t.Errorf("NativeHome = %q", nh)
			}
		})
	}
}

func TestRunTimeoutKillsGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300e6)
	defer cancel()
	dir := t.TempDir()
	// A CLI that never returns must come back as a timeout, not hang the test.
	res := Run(t, ctx, "/bin/sleep", []string{"30"}, []string{"PATH=" + os.Getenv("PATH")}, dir)
	if !res.TimedOut || res.ExitCode != -1 {
		t.Fatalf("got %+v, want a timeout", res)
	}
}
