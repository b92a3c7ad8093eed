package agents

import "testing"

func TestTargetCheckAndStableID(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Target
		err  string
	}{
		{"no home", Target{Cwd: "/w"}, "x: target needs a home and an absolute cwd"},
		{"relative cwd", Target{Home: "/h", Cwd: "w"}, "x: target needs a home and an absolute cwd"},
		{"ok", Target{Home: "/h", Cwd: "/w"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.t.Check("x")
			if got := ""; err != nil {
				got = err.Error()
				if got != tc.err {
					t.Fatalf("Check = %q, want %q", got, tc.err)
				}
			} else if tc.err != "" {
				t.Fatalf("Check = nil, want %q", tc.err)
			}
		})
	}
	a, b := Target{SessionID: "s1"}.StableID("x"), Target{SessionID: "s1"}.StableID("x")
	if a != b || a == (Target{SessionID: "s2"}.StableID("x")) || a == (Target{SessionID: "s1"}.StableID("y")) || len(a) != 36 {
		t.Fatalf("StableID not stable per agent and session: %q %q", a, b)
	}
	if got := (Target{SessionID: "s1", NativeID: "n"}).StableID("x"); got != "n" {
		t.Fatalf("StableID with a native id = %q", got)
	}
}
