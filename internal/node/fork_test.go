package node

import (
	"testing"

	"github.com/google/uuid"

	"github.com/cast-dev/cast/internal/delivery"
	"github.com/cast-dev/cast/internal/runner"
)

func TestNativeForkOK(t *testing.T) {
	tip := &nativeSession{ID: "p-native", Path: "/h/p.jsonl", KnownUpto: 6}
	base := forkCut{Agent: "claude", Parent: tip, ParentCwd: "/w", Cwd: "/w", ForkedAt: 6, Delivered: 6}
	tests := []struct {
		name string
		edit func(*forkCut)
		want bool
	}{
		{"claude at the tip the parent's native session has seen", func(*forkCut) {}, true},
		{"earlier cut", func(c *forkCut) { c.ForkedAt, c.Delivered = 4, 4 }, false},
		{"native session behind the cut", func(c *forkCut) { c.Parent = &nativeSession{ID: "p", KnownUpto: 5} }, false},
		{"stale parent", func(c *forkCut) { c.Parent = &nativeSession{ID: "p", KnownUpto: 6, Stale: true} }, false},
		{"parent misses a message sent while it ran", func(c *forkCut) {
			c.Parent = &nativeSession{ID: "p", KnownUpto: 6, Missing: []delivery.Range{{From: 5, To: 5}}}
		}, false},
		{"parent on another node", func(c *forkCut) { c.Parent = nil }, false},
		{"parent row without id", func(c *forkCut) { c.Parent = &nativeSession{KnownUpto: 6} }, false},
		{"not the first turn after the cut", func(c *forkCut) { c.Delivered = 9 }, false},
		{"rows after the cut besides the notice", func(c *forkCut) { c.AfterCut = 1 }, false},
		{"no cut", func(c *forkCut) { c.ForkedAt, c.Delivered = 0, 0 }, false},
		{"other cwd", func(c *forkCut) { c.Cwd = "/elsewhere" }, false},
		{"codex at the tip", func(c *forkCut) { c.Agent = "codex" }, true},
		{"gemini: no native fork", func(c *forkCut) { c.Agent = "gemini" }, false},
		{"opencode at the tip", func(c *forkCut) { c.Agent = "opencode" }, true},
		{"unknown agent", func(c *forkCut) { c.Agent = "nope" }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			ok, why := nativeForkOK(c)
			if ok != tc.want || (!ok && why == "") {
				t.Fatalf("nativeForkOK(%+v) = %v %q, want %v", c, ok, why, tc.want)
			}
		})
	}
}

func TestForkDidNotRun(t *testing.T) {
	fail := func(reason string) error { return &runner.Error{Reason: reason} }
	tests := []struct {
		name string
		res  runner.Result
		err  error
		want bool
	}{
		{"ran", runner.Result{NativeID: "n", PromptSeen: true, Emitted: 1}, nil, false},
		{"source gone", runner.Result{}, fail(runner.ReasonNoSession), true},
		{"unsupported", runner.Result{}, fail(runner.ReasonUnsupported), true},
		{"failed with no new session", runner.Result{}, fail(runner.ReasonFailed), true},
		{"failed before the prompt was recorded", runner.Result{NativeID: "n"}, fail(runner.ReasonFailed), true},
		{"refused after taking the prompt", runner.Result{NativeID: "n", PromptSeen: true}, fail(runner.ReasonNotLoggedIn), false},
		{"something emitted", runner.Result{Emitted: 1}, fail(runner.ReasonFailed), false},
		{"interrupted", runner.Result{}, fail(runner.ReasonInterrupted), false},
		{"rate limited", runner.Result{}, fail(runner.ReasonRateLimited), false},
	}
	for _, tc := range tests {
		if got := forkDidNotRun(tc.res, tc.err); got != tc.want {
			t.Errorf("%s: forkDidNotRun = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A rebuild of a Codex session never reuses a native id (a Codex fork
// reads its source's rollout, which must not be rewritten under it), nor
// does any rebuild in the user's own folder (the user may have resumed that
// session themselves): those get a new UUID, or "" for OpenCode, whose
// writer then mints a new ses_ id. Isolated agents keep the row's id.
func TestRebuildNativeID(t *testing.T) {
	row := &nativeSession{ID: "0b6f5d3e-8f1a-4c55-9a57-1f0e9f7d2c10", Stale: true}
	tests := []struct {
		agent  string
		ns     *nativeSession
		shared bool
		same   bool // want ns.ID back
		empty  bool // want "" (the writer picks)
	}{
		{"claude", row, false, true, false},
		{"claude", nil, false, false, true},
		{"gemini", row, false, true, false},
		{"pi", row, false, true, false},
		{"opencode", row, false, true, false},
		{"codex", row, false, false, false},
		{"codex", nil, false, false, false},
		{"claude", row, true, false, false},
		{"claude", nil, true, false, false},
		{"gemini", row, true, false, false},
		{"pi", row, true, false, false},
		{"opencode", row, true, false, true},
		{"codex", row, true, false, false},
	}
	for _, tc := range tests {
		got := rebuildNativeID(tc.agent, tc.ns, tc.shared)
		switch {
		case tc.same && got != tc.ns.ID:
			t.Errorf("%s shared=%v: rebuild id %q, want the row's %q", tc.agent, tc.shared, got, tc.ns.ID)
		case tc.empty && got != "":
			t.Errorf("%s shared=%v: rebuild id %q, want none", tc.agent, tc.shared, got)
		case !tc.same && !tc.empty:
			if _, err := uuid.Parse(got); err != nil || got == row.ID {
				t.Errorf("%s shared=%v: rebuild id %q, want a new UUID", tc.agent, tc.shared, got)
			}
			if again := rebuildNativeID(tc.agent, tc.ns, tc.shared); again == got {
				t.Errorf("%s shared=%v: two rebuilds got one id %q", tc.agent, tc.shared, got)
			}
		}
	}
}

// A native session is rebuilt before a turn on another fleet account only
// for an agent that binds it to its account (Codex).
func TestBoundElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name, agent, was, now string
		ns                    bool
		want                  bool
	}{
		{"codex on the account that wrote it", "codex", "a", "a", true, false},
		{"codex after a switch", "codex", "a", "b", true, true},
		{"codex, first fleet turn after none", "codex", "", "a", true, true},
		{"codex, fleet account removed", "codex", "a", "", true, true},
		{"codex, no native session", "codex", "a", "b", false, false},
		{"claude after a switch", "claude", "a", "b", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ns *nativeSession
			if tc.ns {
				ns = &nativeSession{ID: "n", Account: tc.was}
			}
			if got := ns.boundElsewhere(tc.agent, tc.now); got != tc.want {
				t.Fatalf("boundElsewhere = %v, want %v", got, tc.want)
			}
		})
	}
}
