package cli

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// switchServer is a control plane whose session s1 runs claude in state
// before a switch; the switch answers with the agent asked for.
type switchServer struct {
	castv1.UnimplementedSessionServiceServer
	state castv1.SessionState
}

func (s *switchServer) GetSession(_ context.Context, req *castv1.GetSessionRequest) (*castv1.Session, error) {
	return &castv1.Session{Id: req.SessionId, Node: "n1", Agent: "claude", State: s.state, LastSeq: 4}, nil
}

func (s *switchServer) SwitchSession(_ context.Context, req *castv1.SwitchSessionRequest) (*castv1.Session, error) {
	agent := req.Agent
	if agent == "" {
		agent = "claude"
	}
	return &castv1.Session{Id: req.SessionId, Node: "n1", Agent: agent, Model: req.Model, Effort: req.Effort, State: s.state, LastSeq: 5}, nil
}

// A switch to another agent stops the turn the old one runs (or the tool
// it waits to run), and the request it was answering stays in the history
// unanswered. `cast switch` used to say only "now runs codex", so the user
// waited for an answer that never came: it now says the turn was stopped
// and what to do.
func TestSwitchSaysItStoppedTheRunningTurn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state castv1.SessionState
		args  []string
		told  bool
	}{
		{"running", castv1.SessionState_SESSION_STATE_RUNNING, []string{"--agent", "codex"}, true},
		{"waiting on a permission", castv1.SessionState_SESSION_STATE_WAITING_PERMISSION, []string{"--agent", "codex"}, true},
		{"idle", castv1.SessionState_SESSION_STATE_IDLE, []string{"--agent", "codex"}, false},
		{"a model switch stops nothing", castv1.SessionState_SESSION_STATE_RUNNING, []string{"--model", "opus"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runSwitch(t, tc.state, tc.args...)
			if code != 0 {
				t.Fatalf("cast switch exited %d: %s", code, errOut.String())
			}
			told := strings.Contains(out.String(), "stopped the turn Claude Code was running")
			if told != tc.told || (told && !strings.Contains(out.String(), "send it again")) {
				t.Fatalf("cast switch printed (told %v, want %v):\n%s", told, tc.told, out.String())
			}
		})
	}
}

// `cast switch ID --effort high` answered "ID now runs codex · gpt-5": the
// one thing switched was not in the answer, so the user could not tell it
// took. The answer names the effort the session now runs with.
func TestSwitchEffortSaysTheEffort(t *testing.T) {
	out, errOut, code := runSwitch(t, castv1.SessionState_SESSION_STATE_IDLE, "--effort", "high")
	if code != 0 {
		t.Fatalf("cast switch exited %d: %s", code, errOut.String())
	}
	if want := "s1abcde now runs claude · effort high; the next message goes to it\n"; out.String() != want {
		t.Fatalf("cast switch --effort printed %q, want %q", out.String(), want)
	}
}

// runSwitch runs `cast switch s1abcde args...` against a switchServer in
// state.
func runSwitch(t *testing.T, state castv1.SessionState, args ...string) (out, errOut *bytes.Buffer, code int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	castv1.RegisterSessionServiceServer(srv, &switchServer{state: state})
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut = &bytes.Buffer{}, &bytes.Buffer{}
	code = Main(ctx, append([]string{"--addr", l.Addr().String(), "switch", "s1abcde"}, args...), strings.NewReader(""), out, errOut)
	return out, errOut, code
}
