package cli

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// complete runs cobra's hidden completion command as a shell would
// (`cast __complete ARGS... PREFIX`) and returns the candidates.
func complete(t *testing.T, addr string, args ...string) []string {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), append([]string{"__complete", "--addr", addr}, args...), strings.NewReader(""), &out, &errOut)
	if code != 0 {
		t.Fatalf("cast __complete %v: exit %d: %s", args, code, errOut.String())
	}
	var got []string
	for _, line := range strings.Split(out.String(), "\n") {
		if line != "" && !strings.HasPrefix(line, ":") { // ":4" is the directive
			got = append(got, line)
		}
	}
	return got
}

// Session ids, nodes, labels and agents complete from a real control
// plane; a title's control characters never reach the shell; an
// unreachable control plane completes nothing, with no error.
func TestShellCompletion(t *testing.T) {
	c, addr := diffRig(t)
	sess := historySession(t, c, t.TempDir(), []*castv1.Message{{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "hi"}})
	want := sess.Id + "\tclaude · diff test"
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"read", ""}, []string{want}},
		{[]string{"send", sess.Id[:2]}, []string{want}},
		{[]string{"send", sess.Id, ""}, nil}, // MESSAGE is not a session
		{[]string{"send", "zzz"}, nil},
		{[]string{"migrate", "start", "--to", "n1", ""}, []string{want}},
		{[]string{"migrate", "start", "--to", ""}, []string{"n1"}},
		{[]string{"drain", ""}, []string{"n1"}},
		{[]string{"node", "rm", ""}, []string{"n1"}},
		{[]string{"ls", "--node", ""}, []string{"n1"}},
		{[]string{"new", "--agent", "cl"}, []string{"claude"}},
		{[]string{"handoff", sess.Id, "--agent", "co"}, []string{"codex"}},
		{[]string{"approve", "-s", ""}, []string{want}},
		{[]string{"migrate", "cancel", ""}, nil}, // a migration's id, not a session's
		{[]string{"ls", "-o", ""}, []string{"json", "yaml", "wide", "name"}},
		{[]string{"node", "ls", "--output", "y"}, []string{"json", "yaml", "wide", "name"}}, // the shell filters by prefix
	} {
		got := complete(t, addr, tc.args...)
		if tc.want == nil && len(got) > 0 || tc.want != nil && !slices.Equal(got, tc.want) && !containsAll(got, tc.want) {
			t.Errorf("complete %q: got %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := complete(t, "127.0.0.1:1", "read", ""); len(got) > 0 {
		t.Errorf("completion with no control plane: %q", got)
	}
	if got := oneLine("a\x1b[31mred\ntitle"); strings.ContainsAny(got, "\x1b\n") {
		t.Errorf("oneLine kept control characters: %q", got)
	}
}

func containsAll(got, want []string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}
