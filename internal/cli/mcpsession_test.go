package cli

import (
	"strings"
	"testing"
)

// cast mcp (and mcp call) runs inside a session: CAST_SESSION unset is
// said as unset, and set to what is no session id as malformed, with what
// ids look like (it said "is not set" for both).
func TestMCPSaysWhatIsWrongWithCASTSESSION(t *testing.T) {
	for _, tc := range []struct {
		env, want string
	}{
		{"", "CAST_SESSION is not set"},
		{"Not/An-Id", `CAST_SESSION "Not/An-Id" is malformed`},
	} {
		t.Setenv("CAST_SESSION", tc.env)
		for _, args := range [][]string{{"mcp"}, {"mcp", "call", "history"}} {
			out, errOut, code := runMain(t, "127.0.0.1:1", args...)
			if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
				t.Errorf("CAST_SESSION=%q cast %s: exit %d, stdout %q, stderr %q; want exit 2 saying %q", tc.env, strings.Join(args, " "), code, out, errOut, tc.want)
			}
		}
	}
}
