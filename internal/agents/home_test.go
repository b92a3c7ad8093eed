package agents

import "testing"

func TestHomeHint(t *testing.T) {
	for _, tc := range []struct {
		a    Agent
		want string
	}{
		{Agent{Name: "x", HomeEnv: "X_HOME", DefaultHome: ".x"}, "X_HOME (~/.x)"},
		{Agent{Name: "y", DefaultHome: ".y/agent"}, "~/.y/agent"},
		{Agent{Name: "z"}, "~/.z"},
	} {
		if got := tc.a.HomeHint(); got != tc.want {
			t.Errorf("%s: HomeHint() = %q, want %q", tc.a.Name, got, tc.want)
		}
	}
}

func TestHomeHintsSkipsUnknownNames(t *testing.T) {
	if got := HomeHints([]string{"no-such-agent"}); got != "" {
		t.Errorf("HomeHints(unknown) = %q, want empty", got)
	}
}
