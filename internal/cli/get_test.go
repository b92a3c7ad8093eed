package cli

import (
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// `cast get` shows how the last turn ended: a failure's reason and exit
// code as the last error, an interrupted turn as "last turn: interrupted"
// with no last error. An interrupted turn showed "last error: exit 143"
// (the CLI killed by the node's signal) until the next turn ended. A turn
// a move stopped, whose prompt runs again, showed idle with no word of it.
func TestDescribeLastTurn(t *testing.T) {
	idle, failed := castv1.SessionState_SESSION_STATE_IDLE, castv1.SessionState_SESSION_STATE_FAILED
	for _, tc := range []struct {
		name                    string
		sess                    *castv1.Session
		wantLastError, wantTurn string
	}{
		{"completed", &castv1.Session{State: idle}, "", ""},
		{"interrupted", &castv1.Session{State: idle, LastTurnInterrupted: true, LastExitCode: 143}, "", "interrupted"},
		{"interrupted, the next turn running", &castv1.Session{State: castv1.SessionState_SESSION_STATE_RUNNING, LastTurnInterrupted: true}, "", "interrupted"},
		{"failed", &castv1.Session{State: failed, StateReason: "claude: bad request", LastExitCode: 1}, "claude: bad request; exit 1", ""},
		{"exited non-zero", &castv1.Session{State: idle, LastExitCode: 2}, "exit 2", ""},
		// A move stopped it (or its node cut off or stopping): its prompt
		// runs again, so no error; the session shows idle, and said
		// nothing of the prompt still to run.
		{"abandoned", &castv1.Session{State: idle, Node: "n2", LastTurnAbandoned: true, LastExitCode: 143}, "",
			"stopped by a move or its node going away; its prompt runs again on n2"},
		{"abandoned, no owner yet", &castv1.Session{State: idle, LastTurnAbandoned: true, LastExitCode: 143}, "",
			"stopped by a move or its node going away; its prompt runs again"},
		{"abandoned, still moving", &castv1.Session{State: idle, Node: "n1", FencedBy: "m1", LastTurnAbandoned: true, LastExitCode: 143}, "",
			"stopped by a move or its node going away; its prompt runs again once the move ends"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := map[string]string{}
			for _, r := range describeRows(tc.sess) {
				rows[r[0]] = r[1]
			}
			if rows["last error"] != tc.wantLastError || rows["last turn"] != tc.wantTurn {
				t.Fatalf("last error %q, last turn %q; want %q, %q", rows["last error"], rows["last turn"], tc.wantLastError, tc.wantTurn)
			}
		})
	}
}
