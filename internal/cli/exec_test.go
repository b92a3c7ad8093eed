package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/transcript"
)

// doneTurnServer is a control plane whose session's turn had ended by the
// time `cast exec --resume` watched it: WatchSession answers as the real
// one does, the session as it is first (idle, last_seq past the prompt),
// then the messages from start_seq.
type doneTurnServer struct {
	castv1.UnimplementedSessionServiceServer
	answers []string // the turn's assistant messages, after the prompt
	// interrupted: someone stopped the turn (its end says so).
	interrupted bool
}

const doneTurnPrompt = 4 // the seq SendMessage gives the prompt

func (s *doneTurnServer) GetSession(_ context.Context, req *castv1.GetSessionRequest) (*castv1.Session, error) {
	return &castv1.Session{Id: req.SessionId, Node: "n1", Agent: "claude", State: castv1.SessionState_SESSION_STATE_IDLE, LastSeq: doneTurnPrompt - 1}, nil
}

func (s *doneTurnServer) SendMessage(_ context.Context, req *castv1.SendMessageRequest) (*castv1.SendMessageResponse, error) {
	return &castv1.SendMessageResponse{Message: &castv1.Message{Seq: doneTurnPrompt, Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: req.Text},
		Node: "n1", NodeConnected: true}, nil
}

func (s *doneTurnServer) WatchSession(req *castv1.WatchSessionRequest, stream castv1.SessionService_WatchSessionServer) error {
	last := int64(doneTurnPrompt + len(s.answers))
	if err := stream.Send(&castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Session{Session: &castv1.Session{
		Id: req.SessionId, Node: "n1", Agent: "claude", State: castv1.SessionState_SESSION_STATE_IDLE, LastSeq: last, DeliveredSeq: doneTurnPrompt,
		LastTurnInterrupted: s.interrupted}}}); err != nil {
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
	code, out, errOut := execAgainst(t, &doneTurnServer{answers: []string{"first part", "the answer"}})
	if code != 0 {
		t.Fatalf("cast exec exited %d: %s", code, errOut)
	}
	if want := "first part\nthe answer\n"; out != want {
		t.Fatalf("cast exec printed %q, want %q (stderr %q)", out, want, errOut)
	}
}

// A turn someone else interrupted ends `cast exec` with exit 130 (as its
// own Ctrl-C does) and a word that it was interrupted, not its partial
// answer and exit 0 (or the CLI's death by the node's signal, 143): a
// script must not take it for an answer.
func TestExecOfAnInterruptedTurn(t *testing.T) {
	code, out, errOut := execAgainst(t, &doneTurnServer{answers: []string{"the first half"}, interrupted: true})
	if code != 130 || out != "" || !strings.Contains(errOut, "sess001's turn was interrupted") {
		t.Fatalf("cast exec of an interrupted turn: exit %d, out %q, err %q; want exit 130 saying so, and no answer", code, out, errOut)
	}
}

// execAgainst runs `cast exec --resume` against a control plane serving
// sessions, and returns its exit code, stdout and stderr.
func execAgainst(t *testing.T, sessions castv1.SessionServiceServer) (int, string, string) {
	t.Helper()
	return execAgainstCtx(t, context.Background(), sessions)
}

// execAgainstCtx is execAgainst under parent (cancelled: Ctrl-C).
func execAgainstCtx(t *testing.T, parent context.Context, sessions castv1.SessionServiceServer) (int, string, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	castv1.RegisterSessionServiceServer(srv, sessions)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(parent, time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := Main(ctx, []string{"--addr", l.Addr().String(), "exec", "--resume", "sess001", "--cwd", t.TempDir(), "go on"},
		strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// restartServer is a control plane that stops in the middle of a turn
// (its first WatchSession ends UNAVAILABLE, as a replica stopping ends its
// watches) and serves the rest of the turn once it is back.
type restartServer struct {
	doneTurnServer
	mu     sync.Mutex
	starts []int64 // start_seq of each WatchSession
}

func (s *restartServer) WatchSession(req *castv1.WatchSessionRequest, stream castv1.SessionService_WatchSessionServer) error {
	s.mu.Lock()
	s.starts = append(s.starts, req.StartSeq)
	first := len(s.starts) == 1
	s.mu.Unlock()
	session := func(st castv1.SessionState, last int64) *castv1.WatchSessionResponse {
		return &castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Session{Session: &castv1.Session{
			Id: req.SessionId, Node: "n1", Agent: "claude", State: st, LastSeq: last, DeliveredSeq: doneTurnPrompt}}}
	}
	message := func(seq int64, text string) *castv1.WatchSessionResponse {
		return &castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Message{Message: &castv1.Message{
			Seq: seq, Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Agent: "claude", Text: text}}}
	}
	var evs []*castv1.WatchSessionResponse
	if first {
		evs = []*castv1.WatchSessionResponse{session(castv1.SessionState_SESSION_STATE_RUNNING, doneTurnPrompt), message(doneTurnPrompt+1, "first part")}
	} else {
		evs = []*castv1.WatchSessionResponse{session(castv1.SessionState_SESSION_STATE_IDLE, doneTurnPrompt+2)}
		if req.StartSeq <= doneTurnPrompt+1 {
			evs = append(evs, message(doneTurnPrompt+1, "first part"))
		}
		evs = append(evs, message(doneTurnPrompt+2, "the answer"))
	}
	for _, ev := range evs {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	if first {
		return status.Error(codes.Unavailable, "the control plane is shutting down; watch again from the next seq")
	}
	<-stream.Context().Done()
	return nil
}

// A control plane that restarts while `cast exec` waits on a turn does not
// end the turn, so it does not end exec either: exec watches again from
// the seq after the last it got, as `cast watch` does, and prints the
// whole answer once. It used to exit with the stopping replica's error.
func TestExecRidesOutAControlPlaneRestart(t *testing.T) {
	fake := &restartServer{}
	code, out, errOut := execAgainst(t, fake)
	if code != 0 {
		t.Fatalf("cast exec exited %d: %s", code, errOut)
	}
	if want := "first part\nthe answer\n"; out != want {
		t.Fatalf("cast exec printed %q, want %q (stderr %q)", out, want, errOut)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fmt.Sprint(fake.starts) != fmt.Sprint([]int64{doneTurnPrompt + 1, doneTurnPrompt + 2}) {
		t.Fatalf("watches from seqs %v, want %d then %d (the one after the last it got)", fake.starts, doneTurnPrompt+1, doneTurnPrompt+2)
	}
}

// What `cast exec` prints is the turn's answer, or, for a slash command
// the agent ran itself with no model call (claude given "/compact"), the
// command's output: exec printed an empty line for it.
func TestExecTurnAnswer(t *testing.T) {
	msg := func(kind castv1.MessageKind, notice, text string) *castv1.WatchSessionResponse {
		return &castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Message{Message: &castv1.Message{Seq: 2, Kind: kind, NoticeType: notice, Text: text}}}
	}
	for _, tc := range []struct {
		name string
		ev   *castv1.WatchSessionResponse
		want []string
	}{
		{"answer", msg(castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "", "hi"), []string{"hi"}},
		{"command output", msg(castv1.MessageKind_MESSAGE_KIND_NOTICE, transcript.NoticeCommandOutput, "Not enough messages to compact."), []string{"Not enough messages to compact."}},
		{"other notice", msg(castv1.MessageKind_MESSAGE_KIND_NOTICE, transcript.NoticeAgentSwitch, "switched"), nil},
		{"thinking", msg(castv1.MessageKind_MESSAGE_KIND_THINKING, "", "hmm"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &execTurn{id: "s", seq: 1}
			tr.see(tc.ev, 2)
			if fmt.Sprint(tr.answer) != fmt.Sprint(tc.want) {
				t.Fatalf("answer %q, want %q", tr.answer, tc.want)
			}
		})
	}
}

// `cast exec --resume` on a session running a turn: the running turn's
// end and answer are not the prompt's. exec took the first idle state
// after its message for its turn's end and printed the earlier turn's
// answer (exit 0) while its own prompt had not run yet. A turn's end is
// the prompt's once the delivery cursor covers it; what an earlier turn
// answered is left out, whether its end comes before or after its answer
// on the watch.
func TestExecTurnSkipsAnEarlierTurn(t *testing.T) {
	sess := func(st castv1.SessionState, last, delivered int64) *castv1.WatchSessionResponse {
		return &castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Session{Session: &castv1.Session{Id: "s", State: st, LastSeq: last, DeliveredSeq: delivered}}}
	}
	answer := func(seq int64, text string) *castv1.WatchSessionResponse {
		return &castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Message{Message: &castv1.Message{Seq: seq, Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: text}}}
	}
	running, idle := castv1.SessionState_SESSION_STATE_RUNNING, castv1.SessionState_SESSION_STATE_IDLE
	for name, evs := range map[string][]*castv1.WatchSessionResponse{
		"answer, then its end": {sess(running, 4, 2), answer(5, "earlier"), sess(idle, 5, 3), sess(running, 5, 3), answer(6, "mine"), sess(idle, 6, 4)},
		"end, then its answer": {sess(running, 4, 2), sess(idle, 5, 3), answer(5, "earlier"), sess(running, 5, 3), sess(idle, 6, 4), answer(6, "mine")},
	} {
		t.Run(name, func(t *testing.T) {
			tr := &execTurn{id: "s", seq: 4}
			got := int64(4)
			for i, ev := range evs {
				if m := ev.GetMessage(); m != nil {
					got = m.Seq
				}
				if done := tr.see(ev, got); done != (i == len(evs)-1) {
					t.Fatalf("after event %d the turn ended: %v (answer %q)", i, done, strings.Join(tr.answer, "\n"))
				}
			}
			if strings.Join(tr.answer, "\n") != "mine" {
				t.Fatalf("answer %q, want only the prompt's own", strings.Join(tr.answer, "\n"))
			}
		})
	}
}

// A turn a move stopped (its node reports it abandoned: idle, the CLI's
// death by the node's signal) is not the prompt's turn's end: the prompt
// runs again on the destination, and `cast exec` answers with that turn,
// exit 0, not its partial first answer and the signal's 143; events while
// the prompt waits to run again (the move's notice) end nothing either.
func TestExecTurnAcrossAnAbandonedTurn(t *testing.T) {
	// The prompt (seq 1) stays undelivered until the turn on the
	// destination takes it: its end reports the delivery cursor past it.
	session := func(st castv1.SessionState, last int64, exit int32, abandoned bool) *castv1.WatchSessionResponse {
		var delivered int64
		if st == castv1.SessionState_SESSION_STATE_IDLE && !abandoned {
			delivered = 1
		}
		return &castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Session{Session: &castv1.Session{
			Id: "s", State: st, LastSeq: last, LastExitCode: exit, LastTurnAbandoned: abandoned, DeliveredSeq: delivered}}}
	}
	answer := func(seq int64, text string) *castv1.WatchSessionResponse {
		return &castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Message{Message: &castv1.Message{
			Seq: seq, Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: text}}}
	}
	idle, running := castv1.SessionState_SESSION_STATE_IDLE, castv1.SessionState_SESSION_STATE_RUNNING
	tr := &execTurn{id: "s", seq: 1}
	for i, step := range []struct {
		ev   *castv1.WatchSessionResponse
		got  int64
		ends bool
	}{
		{session(running, 1, 0, false), 1, false},
		{answer(2, "half an answer"), 2, false},
		{session(idle, 2, 143, true), 2, false},     // abandoned on the source
		{session(idle, 3, 143, true), 3, false},     // the move's notice
		{session(running, 3, 143, false), 3, false}, // the prompt runs again on the destination
		{answer(4, "the answer"), 4, false},
		{session(idle, 4, 0, false), 4, true},
	} {
		if ends := tr.see(step.ev, step.got); ends != step.ends {
			t.Fatalf("event %d: ended %v, want %v", i, ends, step.ends)
		}
	}
	if fmt.Sprint(tr.answer) != "[the answer]" || tr.end.LastExitCode != 0 {
		t.Fatalf("answer %q, exit code %d; want the destination's answer and 0", tr.answer, tr.end.LastExitCode)
	}
}

// An abandoned turn's answers are forgotten with their seqs: a later
// earlier-turn end (an idle state short of the prompt) trims what is left
// by those seqs, which indexed past the answers and panicked.
func TestExecTurnAbandonedThenAnEarlierTurnEnds(t *testing.T) {
	tr := &execTurn{id: "s", seq: 3}
	for _, ev := range []*castv1.WatchSessionResponse{
		{Event: &castv1.WatchSessionResponse_Message{Message: &castv1.Message{Seq: 2, Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "half"}}},
		{Event: &castv1.WatchSessionResponse_Session{Session: &castv1.Session{Id: "s", State: castv1.SessionState_SESSION_STATE_IDLE, LastSeq: 3, LastTurnAbandoned: true}}},
		{Event: &castv1.WatchSessionResponse_Message{Message: &castv1.Message{Seq: 4, Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "earlier turn's"}}},
		{Event: &castv1.WatchSessionResponse_Session{Session: &castv1.Session{Id: "s", State: castv1.SessionState_SESSION_STATE_IDLE, LastSeq: 4, DeliveredSeq: 2}}},
	} {
		if tr.see(ev, 4) {
			t.Fatal("no turn of the prompt's ended")
		}
	}
	if len(tr.answer) != 0 {
		t.Fatalf("answer %q, want none yet", tr.answer)
	}
}

// `cast exec --resume` on a session running a turn whose failure holds
// that turn's messages for the next one (its set-up failed, the CLI not
// logged in: held seq short of the prompt, sent mid-turn): the prompt runs
// in the next turn, which the node starts at once. exec took the earlier
// turn's failure for its own and exited with it before its prompt ran.
func TestExecTurnSkipsAnEarlierHeldFailure(t *testing.T) {
	failed, running, idle := castv1.SessionState_SESSION_STATE_FAILED, castv1.SessionState_SESSION_STATE_RUNNING, castv1.SessionState_SESSION_STATE_IDLE
	tr := &execTurn{id: "s", seq: 4}
	for i, step := range []struct {
		ev   *castv1.WatchSessionResponse
		got  int64
		ends bool
	}{
		{&castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Session{Session: &castv1.Session{Id: "s", State: running, LastSeq: 4, DeliveredSeq: 2}}}, 4, false},
		// The earlier turn (prompt 3) failed holding its prompt.
		{&castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Session{Session: &castv1.Session{Id: "s", State: failed, StateReason: "history read failed",
			LastSeq: 4, DeliveredSeq: 2, HeldSeq: 3, LastExitCode: 1}}}, 4, false},
		{&castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Session{Session: &castv1.Session{Id: "s", State: running, LastSeq: 4, DeliveredSeq: 2}}}, 4, false},
		{&castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Message{Message: &castv1.Message{Seq: 5, Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "mine"}}}, 5, false},
		{&castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Session{Session: &castv1.Session{Id: "s", State: idle, LastSeq: 5, DeliveredSeq: 4}}}, 5, true},
	} {
		if ends := tr.see(step.ev, step.got); ends != step.ends {
			t.Fatalf("event %d: ended %v, want %v (answer %q)", i, ends, step.ends, tr.answer)
		}
	}
	if fmt.Sprint(tr.answer) != "[mine]" || tr.end.State != idle {
		t.Fatalf("answer %q, end %v; want the prompt's own answer and idle", tr.answer, tr.end.State)
	}
}

// `cast exec --resume` on a session running a turn that then fails
// dropping its prompt (the model refused it; the next message runs
// without it): no held seq, the delivery cursor moved past the dropped
// prompt (3) but short of exec's (4), which runs in the next turn. exec
// took that failure for its own end and exited 1 before its prompt ran.
// A failure that neither holds nor moved the cursor (a node older than
// held seq holding exec's prompt) is still exec's.
func TestExecTurnSkipsAnEarlierDroppedFailure(t *testing.T) {
	failed, running, idle := castv1.SessionState_SESSION_STATE_FAILED, castv1.SessionState_SESSION_STATE_RUNNING, castv1.SessionState_SESSION_STATE_IDLE
	state := func(st castv1.SessionState, last, delivered int64) *castv1.WatchSessionResponse {
		s := &castv1.Session{Id: "s", State: st, LastSeq: last, DeliveredSeq: delivered}
		if st == failed {
			s.StateReason, s.LastExitCode = "claude: API Error: 400", 1
		}
		return &castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Session{Session: s}}
	}
	tr := &execTurn{id: "s", seq: 4, from: 2}
	for i, step := range []struct {
		ev   *castv1.WatchSessionResponse
		got  int64
		ends bool
	}{
		{state(running, 4, 2), 4, false},
		{state(failed, 5, 3), 5, false}, // the earlier turn dropped prompt 3 (its notice at 5)
		{state(running, 5, 3), 5, false},
		{&castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Message{Message: &castv1.Message{Seq: 6, Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "mine"}}}, 6, false},
		{state(idle, 6, 4), 6, true},
	} {
		if ends := tr.see(step.ev, step.got); ends != step.ends {
			t.Fatalf("event %d: ended %v, want %v (answer %q)", i, ends, step.ends, tr.answer)
		}
	}
	if fmt.Sprint(tr.answer) != "[mine]" || tr.end.State != idle {
		t.Fatalf("answer %q, end %v; want the prompt's own answer and idle", tr.answer, tr.end.State)
	}
	old := &execTurn{id: "s", seq: 4, from: 2}
	old.see(state(running, 4, 2), 4)
	if !old.see(state(failed, 4, 2), 4) || old.end.State != failed {
		t.Fatal("a failure that neither holds nor moved the delivery cursor was not taken for the prompt's")
	}
}

// heldServer is a control plane whose session holds `cast exec`'s prompt
// without running it, parked on a usage limit. Its watch sends the session and then nothing, until
// exec is stopped; its interrupt answers, as the real one does for a
// session that runs nothing, that there was nothing to stop.
type heldServer struct {
	doneTurnServer
	watching chan struct{}
	account  string // the session's own account ("": the fleet's)
}

func (s *heldServer) held() *castv1.Session {
	return &castv1.Session{Id: "sess001", Node: "n1", Agent: "claude", State: castv1.SessionState_SESSION_STATE_PARKED, StateReason: "claude: rate limited",
		LastSeq: doneTurnPrompt, DeliveredSeq: doneTurnPrompt - 1, HeldSeq: doneTurnPrompt, Account: s.account}
}

func (s *heldServer) GetSession(context.Context, *castv1.GetSessionRequest) (*castv1.Session, error) {
	return s.held(), nil
}

func (s *heldServer) WatchSession(_ *castv1.WatchSessionRequest, stream castv1.SessionService_WatchSessionServer) error {
	if err := stream.Send(&castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Session{Session: s.held()}}); err != nil {
		return err
	}
	close(s.watching)
	<-stream.Context().Done()
	return nil
}

func (s *heldServer) InterruptSession(context.Context, *castv1.InterruptSessionRequest) (*castv1.InterruptSessionResponse, error) {
	return &castv1.InterruptSessionResponse{Idle: true}, nil
}

// Ctrl-C of `cast exec` on a session parked on a usage limit, holding its
// prompt, exits 130, as any interrupted exec does, and says the prompt is
// held, when it runs (nothing stopped it) and how to keep it from running
// (`cast rm`). exec said "the turn had ended", though the parked prompt
// ran, and was answered, when the next fleet credential came. A session
// on its own account is woken by no fleet credential: exec offered `cast
// account use` for it too.
func TestExecInterruptedOnAParkedPrompt(t *testing.T) {
	for _, tc := range []struct {
		account    string
		want, lack []string
	}{
		{"", []string{"runs when a fleet credential", "cast account use"}, nil},
		{"own", nil, []string{"fleet credential", "cast account use"}},
	} {
		srv := &heldServer{watching: make(chan struct{}), account: tc.account}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-srv.watching
			cancel() // Ctrl-C
		}()
		code, out, errOut := execAgainstCtx(t, ctx, srv)
		cancel()
		if code != 130 || out != "" || strings.Contains(errOut, "had ended") {
			t.Fatalf("Ctrl-C of exec on a parked prompt: exit %d, out %q, err %q; want exit 130, no answer, and no word of an ended turn", code, out, errOut)
		}
		for _, w := range append([]string{"parked on a usage limit", "holds the prompt", "next message", "cast switch sess001", "`cast rm sess001` keeps it from running"}, tc.want...) {
			if !strings.Contains(errOut, w) {
				t.Fatalf("Ctrl-C of exec on a prompt parked on account %q: err %q; want it to say %q", tc.account, errOut, w)
			}
		}
		for _, w := range tc.lack {
			if strings.Contains(errOut, w) {
				t.Fatalf("Ctrl-C of exec on a prompt parked on its own account: err %q offers %q, which does not wake it", errOut, w)
			}
		}
	}
}
