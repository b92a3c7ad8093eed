package codecs

import (
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/agents/codex"
	"github.com/cast-dev/cast/internal/custody"
)

// The credential formats come from the drivers that give one, and the
// refusal for any other agent names exactly those.
func TestCredential(t *testing.T) {
	for _, tc := range []struct {
		agent string
		want  custody.Format
		err   string
	}{
		{agent: "claude", want: claude.Credential{}},
		{agent: "codex", want: codex.Credential{}},
		{agent: "gemini", err: "fleet accounts do not cover gemini logins (claude and codex only)"},
		{agent: "nope", err: `unknown agent "nope"`},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			f, err := Credential(tc.agent)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || f != tc.want {
				t.Fatalf("Credential(%s) = %#v, %v", tc.agent, f, err)
			}
		})
	}
}
