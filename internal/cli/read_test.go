package cli

import (
	"context"
	"strings"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// `cast read ID 5:9` on a session of 3 messages printed nothing and exited
// 0, as if those messages were empty: a range that starts past the end is
// refused (exit 2) saying how many messages the session holds and what to
// read instead, as `cast watch --from-seq` past the end is. A range that
// starts inside the session still prints what there is, and an empty
// session says it has none.
func TestReadPastTheEndSaysSo(t *testing.T) {
	c, addr := diffRig(t)
	sess := historySession(t, c, t.TempDir(), []*castv1.Message{
		{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "one"},
		{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "two"},
		{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "three"},
	})
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"5:9"}, []string{"range 5:9 is past the end of " + sess.Id, "holds 3 messages", "cast read " + sess.Id + " 1:3"}},
		{[]string{"4:"}, []string{"range 4: is past the end of " + sess.Id, "holds 3 messages"}},
		{[]string{"7"}, []string{"range 7 is past the end of " + sess.Id, "holds 3 messages"}},
		{[]string{"--json", "5:9"}, []string{"range 5:9 is past the end of " + sess.Id}},
	} {
		out, errOut, code := runMain(t, addr, append([]string{"read", sess.Id}, tc.args...)...)
		if code != 2 || out != "" || !saysAll(errOut, tc.want) {
			t.Errorf("cast read %s %q: exit %d, stdout %q, stderr %q; want exit 2, no stdout, stderr saying %q", sess.Id, tc.args, code, out, errOut, tc.want)
		}
	}
	if out := mustMain(t, addr, "read", sess.Id, "3:9"); !strings.Contains(out, "three") || strings.Contains(out, "two") {
		t.Errorf("cast read %s 3:9 printed %q, want the third message alone", sess.Id, out)
	}

	empty, err := c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), RequestId: "read-empty"})
	if err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runMain(t, addr, "read", empty.Id, "1:5"); code != 2 || out != "" || !saysAll(errOut, []string{"holds no messages", "cast watch " + empty.Id}) {
		t.Errorf("cast read of an empty session 1:5: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
