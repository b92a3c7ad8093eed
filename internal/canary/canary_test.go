package canary_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/canary"
	"github.com/cast-dev/cast/internal/capability"
)

// TestPinnedVersionsPass canaries the CLIs CI pins: every capability each
// one has passes, with one resume turn (and one fork turn where the CLI
// forks natively) against the fake model.
func TestPinnedVersionsPass(t *testing.T) {
	wantForks := map[string]bool{"claude": true, "codex": true, "opencode": true}
	for _, agent := range capability.Agents() {
		t.Run(agent, func(t *testing.T) {
			t.Parallel()
			bin := agenttest.Bin(t, agent)
			c := &canary.Checker{Dir: t.TempDir(), Logf: t.Logf}
			res, err := c.Run(context.Background(), agent, bin)
			if err != nil {
				t.Fatal(err)
			}
			if res.Version == "" {
				t.Errorf("no version found for %s", bin)
			}
			want := len(capability.Takeover)
			if wantForks[agent] {
				want++
			}
			if len(res.Checks) != want {
				t.Errorf("%d checks ran, want %d: %+v", len(res.Checks), want, res.Checks)
			}
			for _, ch := range res.Checks {
				if !ch.Passed {
					t.Errorf("%s %s: %s failed: %s", agent, res.Version, ch.Capability, ch.Detail)
				}
			}
		})
	}
}

// TestResumeThatDropsHistoryFails: a codex update whose resume starts a new
// thread fails the resume check (and the read-back, which lacks the history),
// under the version its package reports.
func TestResumeThatDropsHistoryFails(t *testing.T) {
	bin := filepath.Join(agenttest.DropResumeCodex(t, "0.172.0-nohistory"), "codex")
	c := &canary.Checker{Dir: t.TempDir(), Logf: t.Logf}
	res, err := c.Run(context.Background(), "codex", bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("checks: %+v", res.Checks)
	if res.Version != "0.172.0-nohistory" {
		t.Errorf("version %q", res.Version)
	}
	failed := map[string]string{}
	for _, ch := range res.Checks {
		if !ch.Passed {
			failed[ch.Capability] = ch.Detail
		}
	}
	if _, ok := failed[capability.Write]; ok {
		t.Errorf("write failed: the writer is cast's own: %v", failed)
	}
	if !strings.Contains(failed[capability.Resume], "without the history") {
		t.Errorf("resume verdict %q, want a failure naming the lost history (all: %+v)", failed[capability.Resume], res.Checks)
	}
}
