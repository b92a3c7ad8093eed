package capability_test

import (
	"slices"
	"testing"

	_ "github.com/cast-dev/cast/internal/agents/codecs" // every agent registers itself
	"github.com/cast-dev/cast/internal/capability"
)

func TestAgentsAndCapabilities(t *testing.T) {
	if got, want := capability.Agents(), []string{"claude", "codex", "gemini", "opencode", "pi"}; !slices.Equal(got, want) {
		t.Errorf("agents with a canary: %v, want %v", got, want)
	}
	for _, tc := range []struct {
		agent string
		want  bool
	}{{"claude", true}, {"muse", false}, {"cursor", false}, {"nope", false}} {
		if got := capability.Checkable(tc.agent); got != tc.want {
			t.Errorf("Checkable(%q) = %v, want %v", tc.agent, got, tc.want)
		}
	}
	for _, c := range capability.Takeover {
		if !slices.Contains(capability.All, c) {
			t.Errorf("takeover needs %q, which no canary checks", c)
		}
	}
	if slices.Contains(capability.Takeover, capability.Fork) {
		t.Error("a takeover rebuilds the history; it does not need the CLI's own fork")
	}
}
