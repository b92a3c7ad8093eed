package node

import "testing"

// A subagent's run a turn started is its cast session's worker even when
// adoption finds it between the CLI's exit and the turn's completion
// (the state records the native session only then): the CI failure this
// guards against adopted such a run with no parent it could find.
func TestAdoptCastKnowsATurnsSessionBeforeItCompletes(t *testing.T) {
	d, c := newAdoptCast(t)
	done := d.clis.running("claude")
	if !c.Busy("claude") || c.SessionOf("claude", "n1") != "" {
		t.Fatal("a running turn's session is known before it ran")
	}
	d.clis.used("claude", "/h/n1.jsonl", "n1", "s1")
	done()
	tests := []struct{ agent, native, want string }{
		{"claude", "n1", "s1"},
		{"claude", "n2", ""},
		{"codex", "n1", ""},
		{"claude", "", ""},
	}
	for _, tt := range tests {
		if got := c.SessionOf(tt.agent, tt.native); got != tt.want {
			t.Errorf("SessionOf(%q, %q) = %q, want %q", tt.agent, tt.native, got, tt.want)
		}
	}
	if c.Busy("claude") || !c.Runs("claude", "/h/n1.jsonl", "") {
		t.Fatal("the finished turn is busy still or its file not cast's")
	}
}

// A turn counts as running its agent's CLI from its preparation on, and
// the native session it set up is cast's once it is over, even when the
// CLI never ran (a hold after a rebuild was written).
func TestTurnWritesNativeAsCasts(t *testing.T) {
	d, c := newAdoptCast(t)
	for _, tc := range []struct {
		name     string
		set      func(tr *turn)
		path, id string
	}{
		{"the CLI ran", func(tr *turn) { tr.res.NativePath, tr.res.NativeID = "/h/ran.jsonl", "ran" }, "/h/ran.jsonl", "ran"},
		{"held after prepare", func(tr *turn) { tr.rt.NativePath, tr.rt.NativeID = "/h/rebuilt.jsonl", "rebuilt" }, "/h/rebuilt.jsonl", "rebuilt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &turn{a: d, id: "s-" + tc.id, o: owned{Agent: "claude"}}
			done := tr.writesNative()
			if !c.Busy("claude") {
				t.Fatal("a turn being prepared does not count as running")
			}
			tc.set(tr)
			done()
			if c.Busy("claude") || !c.Runs("claude", tc.path, "") || c.SessionOf("claude", tc.id) != tr.id {
				t.Fatalf("after the turn: busy %v, runs %v, session %q", c.Busy("claude"), c.Runs("claude", tc.path, ""), c.SessionOf("claude", tc.id))
			}
		})
	}
}

// newAdoptCast is a daemon with a fresh state and what adoption asks it.
func newAdoptCast(t *testing.T) (*Daemon, adoptCast) {
	t.Helper()
	st, err := loadState(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{st: st}
	return d, adoptCast{a: d}
}
