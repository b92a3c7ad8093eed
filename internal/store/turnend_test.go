package store_test

import (
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A turn's end report sets what the session shows of its last turn: an
// interrupted turn is no failure (its exit code, the CLI killed by the
// node's signal, is kept for clients that do not read the flag), kept
// while the next turn runs and replaced when it ends; a failed turn's held seq lasts as long as the failure. The
// store kept only the exit code, which `cast get` showed as the last error
// ("exit 143") until the next turn ended.
func TestTurnEndSetsTheLastTurn(t *testing.T) {
	idle, running, failed := castv1.SessionState_SESSION_STATE_IDLE, castv1.SessionState_SESSION_STATE_RUNNING, castv1.SessionState_SESSION_STATE_FAILED
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n1"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	g := fence.Guard{Node: "n1", Token: c.Token}
	for _, step := range []struct {
		name            string
		report          fence.TurnState
		wantInterrupted bool
		wantExit        int32
		wantHeld        int64
	}{
		{"interrupted", fence.TurnState{State: idle, ExitCode: 143, Interrupted: true}, true, 143, 0},
		{"the next turn runs", fence.TurnState{State: running}, true, 143, 0},
		{"and ends", fence.TurnState{State: idle}, false, 0, 0},
		{"interrupted, killed", fence.TurnState{State: idle, ExitCode: -1, Interrupted: true}, true, -1, 0},
		{"failed holding its prompt", fence.TurnState{State: failed, Reason: "not logged in", ExitCode: 1, HeldSeq: 1}, false, 1, 1},
		{"failed again, refused", fence.TurnState{State: failed, Reason: "refused", ExitCode: 2}, false, 2, 0},
		{"held again", fence.TurnState{State: failed, Reason: "not logged in", ExitCode: 1, HeldSeq: 1}, false, 1, 1},
		{"its rerun runs", fence.TurnState{State: running}, false, 1, 0},
		{"interrupt on a failure is no interrupt", fence.TurnState{State: failed, Reason: "x", ExitCode: 3, Interrupted: true}, false, 3, 0},
	} {
		sess, err := s.SetState(ctx, c.Session.Id, g, step.report)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if sess.LastTurnInterrupted != step.wantInterrupted || sess.LastExitCode != step.wantExit || sess.HeldSeq != step.wantHeld {
			t.Fatalf("%s: last turn interrupted %v, last exit code %d, held seq %d; want %v, %d, %d", step.name,
				sess.LastTurnInterrupted, sess.LastExitCode, sess.HeldSeq, step.wantInterrupted, step.wantExit, step.wantHeld)
		}
	}
}
