package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// A real Claude Code waits on cast's permission tool (`cast mcp`) when the
// control plane restarts: the request is in etcd, so the tool asks again
// with its id once the control plane is back, and the person's later
// `cast approve` still reaches the agent, which runs the tool.
func TestPermissionPromptOutlivesAControlPlaneRestart(t *testing.T) {
	t.Parallel()
	r := newMigRig(t, migOpts{cpProcess: true, reconnectMax: time.Second}, "claude")
	// An "ask" rule: Claude Code must ask before running touch.
	settings := filepath.Join(agenttest.NativeHome(r.homes["laptop"]["claude"], "claude"), "settings.json")
	must(t, os.WriteFile(settings, []byte(`{"permissions":{"ask":["Bash(touch:*)"]}}`), 0o600))
	cwd := t.TempDir()
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: cwd, Node: "laptop",
		Text: "TOOLCALL CMD[touch approved.txt]"})
	must(t, err)
	r.waitSession("waiting on the permission", sess.Id, inState(castv1.SessionState_SESSION_STATE_WAITING_PERMISSION))

	if !r.cp.Stop(20 * time.Second) {
		t.Fatal("control plane did not stop")
	}
	r.startControlPlane(nil)
	testharness.WaitConnected(t, r.c, "laptop", true)
	if out := r.cast.must("approve", "-s", sess.Id); !strings.Contains(out, "approved") {
		t.Fatalf("cast approve: %s", out)
	}
	r.waitSession("the approved turn's end", sess.Id, inState(castv1.SessionState_SESSION_STATE_IDLE))
	if _, err := os.Stat(filepath.Join(cwd, "approved.txt")); err != nil {
		t.Fatalf("the tool approved after the restart did not run: %v\n%s", err, r.nodes["laptop"].Output())
	}
}
