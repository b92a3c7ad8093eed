package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// Ctrl-C of a `cast exec` waiting on the real claude says it was
// interrupted (not "no answer within --wait"), stops the turn and exits
// 130; `cast interrupt` of the now idle session says there was nothing
// to stop (not "interrupt sent").
func TestCLIExecCtrlCAndIdleInterrupt(t *testing.T) {
	r := newTurnRig(t, "claude")
	bin := filepath.Join(testharness.Binaries(t), "cast")
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	started := r.fake.TurnsStarted()
	r.fake.Enqueue(fakemodel.Reply{Text: "HELD ANSWER", Gate: gate})
	exec := testharness.StartProcEnv(t, []string{"CAST_ADDR=" + r.addr}, bin, "exec", "--agent", "claude", "--cwd", t.TempDir(), "hold on MARK-INT")
	testharness.WaitFor(t, time.Minute, "the turn at the model", func() bool { return r.fake.TurnsStarted() > started })
	exec.Signal(syscall.SIGINT)
	code, ok := exec.Wait(30 * time.Second)
	if !ok {
		t.Fatalf("cast exec ignored SIGINT:\n%s", exec.Output())
	}
	m := regexp.MustCompile(`session (\S+)'s turn`).FindStringSubmatch(exec.Output())
	if m == nil {
		t.Fatalf("cast exec names no session:\n%s", exec.Output())
	}
	id := m[1]
	if want := fmt.Sprintf("cast: interrupted; stopped session %s's turn (`cast read %s` shows what it wrote)\n", id, id); code != 130 || exec.Output() != want {
		t.Fatalf("interrupted cast exec: exit %d, output %q; want 130 and %q", code, exec.Output(), want)
	}
	sess := r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, 0)
	out, errOut, code := testharness.Run(t, []string{"CAST_ADDR=" + r.addr}, bin, "interrupt", id)
	if want := fmt.Sprintf("nothing to stop: %s is not running a turn\n", id); code != 0 || out != want || errOut != "" {
		t.Fatalf("cast interrupt of idle %s (%v, delivered %d of %d): exit %d, stdout %q, stderr %q; want 0 and %q",
			id, sess.State, sess.DeliveredSeq, sess.LastSeq, code, out, errOut, want)
	}
}
