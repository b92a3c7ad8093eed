package e2e

import (
	"context"
	"strings"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Importing runs no CLI: a Grok or Muse session (real transcripts from
// getspecstory's test data, see the testdata NOTICE.md files) imports on
// a node that has neither CLI, and is then switched to Claude, whose
// first request to the model carries the imported conversation.
func TestImportNeedsNoCLIThenSwitches(t *testing.T) {
	r := newTurnRig(t, "claude")
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return r.cast("", args...)
	}
	for _, tc := range []struct{ agent, path, history string }{
		{"grok", "../agents/grok/testdata/session-basic", "The README says the project is called Project"},
		{"muse", "../agents/muse/testdata/session-multiturn.jsonl", "There are also goal, cron and subagent tools."},
	} {
		out, errOut, code := run("import", "--agent", tc.agent, "--cwd", t.TempDir(), tc.path)
		id := strings.TrimSpace(out)
		if code != 0 || id == "" {
			t.Fatalf("import --agent %s with no %s CLI on any node: exit %d, out %q, err %q", tc.agent, tc.agent, code, out, errOut)
		}
		hint := "node worker has no " + tc.agent + " CLI; continue the session on one it has (claude): `cast switch " + id + " --agent claude` (or `cast fork`, `cast handoff`)\n"
		if !strings.HasSuffix(errOut, hint) {
			t.Errorf("import --agent %s: err %q; want it to end %q", tc.agent, errOut, hint)
		}
		sess, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
		if err != nil || sess.Agent != tc.agent || sess.Node != "worker" {
			t.Fatalf("imported session: %v, %v; want agent %s on worker", sess, err, tc.agent)
		}
		if _, errOut, code := run("switch", id, "--agent", "claude"); code != 0 {
			t.Fatalf("switch the %s import to claude: exit %d, err %q", tc.agent, code, errOut)
		}
		mark := "MARK-IMPORT-" + tc.agent
		seq := r.send(id, mark+" go on")
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
		turns := r.fake.Turns()
		assertItems(t, turns[len(turns)-1].Items, tc.history, mark)
	}
}
