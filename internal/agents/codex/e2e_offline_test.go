package codex

import (
	"context"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/custody/fakeoauth"
)

// A Codex turn in the loopback set-up talks to 127.0.0.1 only. Codex 0.171
// syncs its curated plugin marketplace at every start (`git ls-remote
// https://github.com/openai/plugins.git`, then api.github.com and a
// chatgpt.com archive as fallbacks) unless the plugins feature is off; a
// refusing proxy on 127.0.0.1 sees every such attempt (git and Codex both
// honour HTTPS_PROXY; the fake model stays direct through NO_PROXY). The run
// reaps the CLI's process group, so a helper still running afterwards
// cannot connect later.
func TestE2ETurnStaysOnLoopback(t *testing.T) {
	fake, bin, _, env, cwd := newCodex(t)
	proxy := fakeoauth.Start(t, time.Hour).Proxy(t) // no hosts: every request is refused and logged
	env = append(env, proxy.Env()...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	agenttest.MustRun(t, ctx, bin, []string{"exec", "--skip-git-repo-check", "--json", "OFFLINE-1: hello"}, env, cwd)
	if len(fake.Turns()) == 0 {
		t.Fatal("no model request: the turn did not run")
	}
	if got := proxy.Log(); len(got) > 0 {
		t.Errorf("codex reached beyond 127.0.0.1 during a turn: %q", got)
	}
}
