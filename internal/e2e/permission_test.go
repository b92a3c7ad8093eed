package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// Claude Code asks cast (its --permission-prompt-tool is `cast mcp`) before
// running a tool that needs approval: the session waits on a person,
// `cast approve` lets the tool run, `cast deny` refuses it.
func TestPermissionPromptsReachCast(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	// An "ask" rule: Claude Code must ask before running touch.
	settings := filepath.Join(agenttest.NativeHome(r.homes["claude"], "claude"), "settings.json")
	if err := os.WriteFile(settings, []byte(`{"permissions":{"ask":["Bash(touch:*)"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cwd := t.TempDir()
	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: []string{"CAST_ADDR=" + r.addr}}

	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: cwd, Text: "TOOLCALL CMD[touch approved.txt]"})
	if err != nil {
		t.Fatal(err)
	}
	waiting := r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_WAITING_PERMISSION, 0)
	if !strings.Contains(waiting.StateReason, "touch approved.txt") {
		t.Fatalf("waiting on %q", waiting.StateReason)
	}
	if out := c.must("approve", "-s", sess.Id); !strings.Contains(out, "approved") {
		t.Fatalf("cast approve: %s", out)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	if _, err := os.Stat(filepath.Join(cwd, "approved.txt")); err != nil {
		t.Fatalf("the approved tool did not run: %v", err)
	}

	seq := r.send(sess.Id, "TOOLCALL CMD[touch denied.txt]")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_WAITING_PERMISSION, seq-1)
	c.must("deny", "-s", sess.Id, "-m", "not today")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	if _, err := os.Stat(filepath.Join(cwd, "denied.txt")); err == nil {
		t.Fatal("the denied tool ran")
	}
	_, errOut, code := c.run("approve", "-s", sess.Id)
	if code != 1 || !strings.Contains(errOut, "no pending permission request") {
		t.Fatalf("approve with nothing pending: exit %d %q", code, errOut)
	}
}
