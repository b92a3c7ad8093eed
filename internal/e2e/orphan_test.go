package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/statefile"
	"github.com/cast-dev/cast/internal/testharness"
)

// A node killed -9 just after its turn's CLI started, before it wrote the
// CLI's process group down, left a CLI the restarted node did not know of:
// it went on beside the rerun, both on one native session, and pi's rerun
// carried the prompt twice (seed 28 of the delivery model test: "appears
// more than once in one request"). The test kills the node while the CLI
// is held at the model and takes the process group out of its state file,
// which is what a kill in that window leaves; the restarted node must find
// the CLI by the turn's token and stop it before the rerun.
func TestNodeKilledAsItsCLIStartsStopsThatCLI(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "pi")
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "pi", Cwd: t.TempDir(), Text: "first MARK-K1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, sess.LastSeq)

	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) }) // a CLI left running ends
	r.fake.Enqueue(fakemodel.Reply{Text: "the left CLI's answer", Gate: gate, Delay: 5 * time.Minute})
	asked := r.fake.TurnsStarted()
	seq := r.send(sess.Id, "second MARK-K2")
	testharness.WaitFor(t, 3*time.Minute, "the CLI held at the model", func() bool { return r.fake.TurnsStarted() > asked })
	r.node.Kill()
	forgetProcessGroups(t, filepath.Join(r.dataDir, "state.json"))

	r.startNode()
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	if pids := sessionProcs(sess.Id); len(pids) > 0 {
		t.Errorf("after the restarted node's turn, CLIs of the session still run: pids %v", pids)
	}
	turns := r.fake.Turns() // answered ones: the held one is not among them
	last := turns[len(turns)-1]
	if n := strings.Count(fmt.Sprint(last.Items), "MARK-K2"); n != 1 {
		t.Errorf("the rerun's request carries MARK-K2 %d times; want once:\n%v", n, last.Items)
	}
}

// forgetProcessGroups drops every session's running_pgid from a node's
// state file (it must hold one).
func forgetProcessGroups(t *testing.T, path string) {
	t.Helper()
	b, err := statefile.Read(path, "sessions")
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	sessions, _ := st["sessions"].(map[string]any)
	found := false
	for _, s := range sessions {
		if o, ok := s.(map[string]any); ok && o["running_pgid"] != nil {
			delete(o, "running_pgid")
			found = true
		}
	}
	if !found {
		t.Fatalf("the node's state names no running process group:\n%s", b)
	}
	if b, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := statefile.Rewrite(path, "sessions", b); err != nil {
		t.Fatal(err)
	}
}

// sessionProcs are the pids of processes running with CAST_SESSION=id.
func sessionProcs(id string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00CAST_SESSION="+id+"\x00")) {
			out = append(out, pid)
		}
	}
	return out
}
