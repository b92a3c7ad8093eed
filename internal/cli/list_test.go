package cli

import (
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// `cast ls` narrows on the client what a control plane older than list
// filters answers whole: the flags' filter, field by field.
func TestLsFilterMatch(t *testing.T) {
	s := &castv1.Session{Agent: "claude", Node: "n1", State: castv1.SessionState_SESSION_STATE_IDLE}
	for _, tc := range []struct {
		f    lsFilter
		want bool
	}{
		{lsFilter{}, true},
		{lsFilter{agent: "claude"}, true},
		{lsFilter{agent: "codex"}, false},
		{lsFilter{node: "n1", state: "idle"}, true},
		{lsFilter{node: "n2"}, false},
		{lsFilter{agent: "claude", state: "running"}, false},
	} {
		if got := tc.f.match(s); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.f, got, tc.want)
		}
	}
}
