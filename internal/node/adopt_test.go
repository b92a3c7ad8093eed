package node

import "testing"

// A subagent's run a turn started is its cast session's worker even when
// adoption finds it between the CLI's exit and the turn's completion
// (the state records the native session only then): the CI failure this
// guards against adopted such a run with no parent it could find.
func TestAdoptCastKnowsATurnsSessionBeforeItCompletes(t *testing.T) {
	st, err := loadState(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{st: st}
	c := adoptCast{a: d}
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
