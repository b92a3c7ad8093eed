package e2e

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A node stopped by its service manager while its turn's CLI waits on the
// model: `systemctl stop` with KillMode=control-group (systemd's default)
// and a user session's logout send SIGTERM to every process of the
// service at once, the node and the agent's real CLI both. Once the node
// is started again, with no new message, the stopped message runs: the
// session ends idle with it answered once, and every model request holds
// each message once, in order. Twice: the node signalled at the same
// moment as its CLI, and the CLI signalled first, its exit reaped by the
// node before the node's own signal. The node settled such a turn as one
// whose CLI was killed from outside (held with failed_seq until the next
// message), so the restarted node left the message unanswered.
func TestNodeStoppedWithItsCLIRunsTheMessageAfterRestart(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	m := func(n int) string { return fmt.Sprintf("SVCSTOP-%d", n) }
	marks := []string{m(1)}
	id := r.create("claude", dmsg(m(1)))
	for i, cliFirst := range []bool{false, true} {
		mark := m(i + 2)
		marks = append(marks, mark)
		seq, release := r.sendHeld(id, dmsg(mark))
		node := r.node.Cmd.Process.Pid
		cli := nodeChild(t, agentPIDs(id), node)
		term := func() {
			for _, pid := range agentPIDs(id) {
				_ = syscall.Kill(pid, syscall.SIGTERM)
			}
		}
		if cliFirst {
			term()
			// Reaped: the node's runner saw the CLI's exit.
			testharness.WaitFor(t, time.Minute, "the node reaps its CLI", func() bool {
				_, err := os.Stat(fmt.Sprintf("/proc/%d", cli))
				return os.IsNotExist(err)
			})
			_ = syscall.Kill(node, syscall.SIGTERM)
		} else {
			// As systemd does: the main process first, then the rest of
			// the service's processes, with nothing in between.
			_ = syscall.Kill(node, syscall.SIGTERM)
			term()
		}
		if _, ok := r.node.Wait(time.Minute); !ok {
			t.Fatal("the node did not stop on SIGTERM")
		}
		release() // the request whose CLI is gone
		r.startNode()
		r.waitDelivered(id, fmt.Sprintf("%s answered after the restart, with no new message (cli first: %v)", mark, cliFirst), seq)
	}
	answers := 0
	for _, msg := range r.messages(id) {
		if msg.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT {
			answers++
		}
	}
	if answers != len(marks) {
		t.Errorf("the session holds %d answers for its %d messages, want one each", answers, len(marks))
	}
	assertEveryRequestOnce(t, r, marks)
}
