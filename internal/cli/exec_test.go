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

// doneTurnServer is a control plane whose session's turn had ended by the
// time `cast exec --resume` watched it: WatchSession answers as the real
// one does, the session as it is first (idle, last_seq past the prompt),
// then the messages from start_seq.
type doneTurnServer struct {
	castv1.UnimplementedSessionServiceServer
	answers []string // the turn's assistant messages, after the prompt
}

const doneTurnPrompt = 4 // the seq SendMessage gives the prompt

func (s *doneTurnServer) SendMessage(_ context.Context, req *castv1.SendMessageRequest) (*castv1.SendMessageResponse, error) {
	return &castv1.SendMessageResponse{Message: &castv1.Message{Seq: doneTurnPrompt, Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: req.Text},
		Node: "n1", NodeConnected: true}, nil
}

func (s *doneTurnServer) WatchSession(req *castv1.WatchSessionRequest, stream castv1.SessionService_WatchSessionServer) error {
	last := int64(doneTurnPrompt + len(s.answers))
	if err := stream.Send(&castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Session{Session: &castv1.Session{
		Id: req.SessionId, Node: "n1", Agent: "claude", State: castv1.SessionState_SESSION_STATE_IDLE, LastSeq: last}}}); err != nil {
		return err
	}
	for i, text := range s.answers {
		seq := int64(doneTurnPrompt + 1 + i)
		if seq < req.StartSeq {
			continue
		}
		if err := stream.Send(&castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Message{Message: &castv1.Message{
			Seq: seq, Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Agent: "claude", Text: text}}}); err != nil {
			return err
		}
	}
	<-stream.Context().Done() // then live: nothing more happens
	return nil
}

// A turn that ends before `cast exec`'s watch opens is replayed to it: the
// session (idle, past the prompt) comes first, then the turn's messages.
// exec used to take the idle session for the end of the turn and print
// an empty answer before the messages that held it arrived.
func TestExecAnswerOfATurnThatEndedBeforeTheWatch(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	castv1.RegisterSessionServiceServer(srv, &doneTurnServer{answers: []string{"first part", "the answer"}})
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := Main(ctx, []string{"--addr", l.Addr().String(), "exec", "--resume", "s-done", "--cwd", t.TempDir(), "go on"},
		strings.NewReader(""), &out, &errOut)
	if code != 0 {
		t.Fatalf("cast exec exited %d: %s", code, errOut.String())
	}
	if got, want := out.String(), "first part\nthe answer\n"; got != want {
		t.Fatalf("cast exec printed %q, want %q (stderr %q)", got, want, errOut.String())
	}
}
