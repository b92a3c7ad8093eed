package node

import (
	"cmp"
	"context"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/statefile"
	"github.com/cast-dev/cast/internal/transcript"
)

// plane is a control plane on loopback for the turns of one node: it
// stores the rows appended to its sessions, serves them, answers
// GetSession from forks and takes every turn report. Armed (readsDownOnStart),
// its reads fail from the next turn's start on (the node reaches it, its
// store does not answer) until up is called.
type plane struct {
	mu               sync.Mutex
	msgs             map[string][]*castv1.Message
	sessions         map[string]*castv1.Session
	readsDownOnStart bool
	readsDown        bool
	downCode         codes.Code               // what a read fails with while down (OK: UNAVAILABLE)
	refused          chan struct{}            // closed at the first read refused while down
	reports          chan castv1.SessionState // every turn report's state, in order
	// reportsDown: ReportTurn fails UNAVAILABLE (reportRefused closed at
	// the first) until up is called.
	reportsDown   bool
	reportRefused chan struct{}
	reportCode    codes.Code // what a report fails with while down (OK: UNAVAILABLE)
	// startHeld, when set, holds a start report (RUNNING) until its caller
	// gives up; startIn is closed when one comes in.
	startHeld bool
	// switchedTo, when set, refuses a start report (RUNNING) naming
	// another agent, as the store does after a switch (AGENT_SWITCHED).
	switchedTo string
	startIn    chan struct{}
	// readsHeldOnStart: from the next turn's start on, a read waits until
	// its caller gives up (readIn closed as the first comes in).
	readsHeldOnStart, readsHeld bool
	readIn                      chan struct{}
	// appendCode, when set, refuses every append with it (a store past its
	// quota: RESOURCE_EXHAUSTED) until up is called.
	appendCode codes.Code
	// cursorPast, when set, refuses every report carrying a delivery
	// cursor (INVALID_ARGUMENT), as the control plane does one past the
	// session's last seq (its store restored from an older snapshot).
	cursorPast bool
	// cwdRefused, when set, refuses every report carrying a cwd
	// (INVALID_ARGUMENT), as the control plane does one it does not take.
	cwdRefused bool
	reasons    []string                    // every landed report's reason, in order
	delivered  []int64                     // every landed report's delivery cursor, in order
	landed     []*castv1.ReportTurnRequest // every landed report, in order
	// dispatch, when set, is handed every batch of rows it stored from an
	// append, as the control plane's dispatcher hands the owner every
	// user row stored (internal/controlplane/dispatch.go).
	dispatch func(sessionID string, stored []*castv1.Message)
}

// lastLanded is the last report that landed.
func (p *plane) lastLanded() *castv1.ReportTurnRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.landed) == 0 {
		return &castv1.ReportTurnRequest{}
	}
	return p.landed[len(p.landed)-1]
}

func (p *plane) up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.readsDown, p.reportsDown, p.appendCode = false, false, codes.OK
}

// holdReadsFromStart has reads wait from the next turn's start on, until
// their callers give up; the returned channel is closed as the first
// comes in.
func (p *plane) holdReadsFromStart() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.readsHeldOnStart, p.readIn = true, make(chan struct{})
	return p.readIn
}

// add stores rows at the next seqs and returns them as stored.
func (p *plane) add(sessionID string, msgs ...*castv1.Message) []*castv1.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		m.Seq = int64(len(p.msgs[sessionID]) + 1)
		p.msgs[sessionID] = append(p.msgs[sessionID], m)
	}
	return msgs
}

// rows are the session's rows keep accepts (p.mu held).
func (p *plane) rows(sessionID string, keep func(*castv1.Message) bool) []*castv1.Message {
	var out []*castv1.Message
	for _, m := range p.msgs[sessionID] {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

// notices are the session's notices of type typ.
func (p *plane) notices(sessionID, typ string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.rows(sessionID, func(m *castv1.Message) bool {
		return m.Kind == castv1.MessageKind_MESSAGE_KIND_NOTICE && m.NoticeType == typ
	}) {
		out = append(out, m.Text)
	}
	return out
}

type planeNodes struct {
	castv1.UnimplementedNodeServiceServer
	p *plane
}

func (n planeNodes) ReportTurn(ctx context.Context, req *castv1.ReportTurnRequest) (*castv1.ReportTurnResponse, error) {
	n.p.mu.Lock()
	if held := n.p.startHeld; held && req.State == castv1.SessionState_SESSION_STATE_RUNNING {
		close(n.p.startIn)
		n.p.startHeld = false
		n.p.mu.Unlock()
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	defer n.p.mu.Unlock()
	if req.State == castv1.SessionState_SESSION_STATE_RUNNING && n.p.switchedTo != "" && req.Agent != n.p.switchedTo {
		st, err := status.New(codes.FailedPrecondition, "session now runs "+n.p.switchedTo).WithDetails(&errdetails.ErrorInfo{Reason: errs.ReasonAgentSwitched})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	if n.p.reportsDown {
		select {
		case <-n.p.reportRefused:
		default:
			close(n.p.reportRefused)
		}
		return nil, status.Error(cmp.Or(n.p.reportCode, codes.Unavailable), "report refused")
	}
	if n.p.cursorPast && req.DeliveredSeq != 0 {
		return nil, status.Error(codes.InvalidArgument, "delivered_seq is past the session's last seq")
	}
	if n.p.cwdRefused && req.Cwd != "" {
		return nil, status.Error(codes.InvalidArgument, "cwd is not one the control plane takes")
	}
	n.p.reasons = append(n.p.reasons, req.StateReason)
	n.p.delivered = append(n.p.delivered, req.DeliveredSeq)
	n.p.landed = append(n.p.landed, req)
	if req.State == castv1.SessionState_SESSION_STATE_RUNNING && n.p.readsDownOnStart {
		n.p.readsDownOnStart, n.p.readsDown = false, true
	}
	if req.State == castv1.SessionState_SESSION_STATE_RUNNING && n.p.readsHeldOnStart {
		n.p.readsHeldOnStart, n.p.readsHeld = false, true
	}
	select {
	case n.p.reports <- req.State:
	default: // a test that does not read them
	}
	return &castv1.ReportTurnResponse{}, nil
}

func (n planeNodes) AppendOwnerMessages(_ context.Context, req *castv1.AppendOwnerMessagesRequest) (*castv1.AppendOwnerMessagesResponse, error) {
	n.p.mu.Lock()
	code := n.p.appendCode
	n.p.mu.Unlock()
	if code != codes.OK {
		return nil, status.Error(code, "append refused")
	}
	var msgs []*castv1.Message
	for _, m := range req.Messages {
		msgs = append(msgs, proto.Clone(m).(*castv1.Message))
	}
	stored := n.p.add(req.SessionId, msgs...)
	n.p.mu.Lock()
	dispatch := n.p.dispatch
	n.p.mu.Unlock()
	if dispatch != nil {
		dispatch(req.SessionId, stored)
	}
	return &castv1.AppendOwnerMessagesResponse{Messages: stored}, nil
}

type planeSessions struct {
	castv1.UnimplementedSessionServiceServer
	p *plane
}

func (s planeSessions) ListMessages(ctx context.Context, req *castv1.ListMessagesRequest) (*castv1.ListMessagesResponse, error) {
	s.p.mu.Lock()
	if s.p.readsHeld {
		s.p.readsHeld = false
		close(s.p.readIn)
		s.p.mu.Unlock()
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	defer s.p.mu.Unlock()
	if s.p.readsDown {
		select {
		case <-s.p.refused:
		default:
			close(s.p.refused)
		}
		return nil, status.Error(cmp.Or(s.p.downCode, codes.Unavailable), "store not answering")
	}
	return &castv1.ListMessagesResponse{Messages: s.p.rows(req.SessionId, func(m *castv1.Message) bool {
		return m.Seq >= req.StartSeq && (req.EndSeq == 0 || m.Seq <= req.EndSeq)
	})}, nil
}

func (s planeSessions) GetSession(_ context.Context, req *castv1.GetSessionRequest) (*castv1.Session, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if sess, ok := s.p.sessions[req.SessionId]; ok {
		return sess, nil
	}
	return &castv1.Session{Id: req.SessionId}, nil
}

// rerunDaemon is a node whose Claude is the real, pinned CLI on the fake
// model, talking to a plane.
func rerunDaemon(t *testing.T, fm *fakemodel.Server) (*Daemon, *plane) {
	t.Helper()
	p := &plane{msgs: map[string][]*castv1.Message{}, sessions: map[string]*castv1.Session{},
		refused: make(chan struct{}), reportRefused: make(chan struct{}), reports: make(chan castv1.SessionState, 64)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	castv1.RegisterNodeServiceServer(srv, planeNodes{p: p})
	castv1.RegisterSessionServiceServer(srv, planeSessions{p: p})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	home, env := agenttest.NodeEnv(t, "claude", fm.URL)
	cfg := Config{Name: "laptop", DataDir: t.TempDir(), ControlPlane: l.Addr().String(), Insecure: true, IsolatedHomes: true,
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond, ReadinessInterval: time.Second,
		Agents: map[string]AgentSetup{"claude": {Bin: agenttest.Bin(t, "claude"), Home: home, Env: env}}}
	a, err := New(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.cli.Close() })
	return a, p
}

// A turn rerun on a rebuilt native session (the resumed native session
// was gone, or the native fork did not run) whose set-up fails, here on
// the history read the rebuild needs, never showed the agent its prompt:
// like a first attempt whose set-up failed, the prompt is held (not
// marked delivered, no "Not delivered" notice), and the next turn carries
// it to the model exactly once.
func TestRerunWhoseSetUpFailedHoldsThePrompt(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup gives the session (s1) its node state; the plane already
		// holds seqs 1-3 (a user message, the answer, the prompt).
		setup func(t *testing.T, a *Daemon, p *plane, cwd string)
	}{
		{"resumed native session gone", func(t *testing.T, a *Daemon, _ *plane, cwd string) {
			if err := a.st.assign("s1", func(o *owned) {
				o.Token, o.Agent, o.Cwd = 1, "claude", cwd
				o.ReceivedSeq, o.DeliveredSeq = 3, 2
				// A native session the node ran, whose file is gone.
				o.Native = map[string]*nativeSession{"claude": {ID: uuid.NewString(), KnownUpto: 2}}
			}); err != nil {
				t.Fatal(err)
			}
		}},
		{"native fork did not run", func(t *testing.T, a *Daemon, p *plane, cwd string) {
			// s1 forks p1 at seq 2, the tip p1's native session has seen;
			// that session's file is gone, so the fork fails before the CLI runs.
			p.mu.Lock()
			p.sessions["s1"] = &castv1.Session{Id: "s1", ParentId: "p1", ForkedAtSeq: 2}
			p.mu.Unlock()
			if err := a.st.assign("p1", func(o *owned) {
				o.Token, o.Agent, o.Cwd = 1, "claude", cwd
				o.ReceivedSeq, o.DeliveredSeq = 2, 2
				o.Native = map[string]*nativeSession{"claude": {ID: uuid.NewString(), KnownUpto: 2}}
			}); err != nil {
				t.Fatal(err)
			}
			if err := a.st.assign("s1", func(o *owned) {
				o.Token, o.Agent, o.Cwd = 1, "claude", cwd
				o.ReceivedSeq, o.DeliveredSeq = 3, 2
			}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fm := fakemodel.Start(t)
			a, p := rerunDaemon(t, fm)
			cwd := t.TempDir()
			_ = p.add("s1",
				&castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "first question", ClientId: "u1"},
				&castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "first answer", Agent: "claude", ClientId: "a1"},
				&castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "second question", ClientId: "u2"})
			tc.setup(t, a, p, cwd)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			p.mu.Lock()
			p.readsDownOnStart = true
			p.mu.Unlock()
			o, _ := a.st.get("s1")
			if err := a.runTurn(ctx, "s1", o); err == nil {
				t.Fatal("a turn whose rerun was not set up reported success")
			}
			if o, _ := a.st.get("s1"); o.DeliveredSeq != 2 {
				t.Fatalf("delivered seq %d after a rerun that never ran; want 2 (the prompt, seq 3, held)", o.DeliveredSeq)
			}
			if n := p.notices("s1", transcript.NoticeUndelivered); len(n) > 0 {
				t.Fatalf("the held prompt got undelivered notices %q", n)
			}

			p.up()
			o, _ = a.st.get("s1")
			if err := a.runTurn(ctx, "s1", o); err != nil {
				t.Fatalf("the next turn: %v", err)
			}
			if o, _ := a.st.get("s1"); o.DeliveredSeq != 3 {
				t.Fatalf("delivered seq %d after the next turn, want 3", o.DeliveredSeq)
			}
			turns := fm.Turns()
			if len(turns) == 0 {
				t.Fatal("no model request")
			}
			users := userTexts(turns[len(turns)-1])
			if got := strings.Count(strings.Join(users, "\n"), "second question"); got != 1 {
				t.Fatalf("the model's request holds the prompt %d times, want once; user items %q", got, users)
			}
			if got := strings.Count(strings.Join(users, "\n"), "first question"); got != 1 {
				t.Fatalf("the model's request holds the earlier message %d times, want once; user items %q", got, users)
			}
		})
	}
}

// workerDaemon is rerunDaemon whose session workers run (a.wake): they
// stop, and are waited for, when the test ends. ctx bounds the test.
func workerDaemon(t *testing.T, fm *fakemodel.Server) (*Daemon, *plane, context.Context) {
	t.Helper()
	a, p := rerunDaemon(t, fm)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	wctx, stop := context.WithCancel(ctx)
	a.runCtx = wctx
	t.Cleanup(cancel)
	t.Cleanup(a.workers.wg.Wait)
	t.Cleanup(stop)
	return a, p, ctx
}

// A turn whose set-up fails because the control plane does not answer
// (UNAVAILABLE, as during a kill -9 or a restart of the control plane)
// did not fail: the user's message is answered once the control plane
// answers again, with no new message, and the prompt reaches the model
// exactly once. The session's worker runs it (its back-off and wakes),
// for the first attempt's set-up (the history a rebuild reads) and for a
// rerun's on a rebuilt native session.
func TestTurnWhoseSetUpFailedTransientlyRunsAgain(t *testing.T) {
	for _, tc := range setUpReads {
		t.Run(tc.name, func(t *testing.T) {
			fm := fakemodel.Start(t)
			a, p, ctx := workerDaemon(t, fm)

			tc.setup(t, a, p)
			p.mu.Lock()
			p.readsDownOnStart = true
			p.mu.Unlock()
			a.wake("s1")
			select {
			case <-p.refused: // the turn started; its set-up cannot read the history
			case <-ctx.Done():
				t.Fatal("the turn's set-up never read the history")
			}
			p.up()

			// The worker runs the turn again on its own: wait for the
			// report that ends it (idle, the prompt delivered).
			rerun := time.After(time.Minute) // a turn on the fake model takes seconds
			for {
				var st castv1.SessionState
				select {
				case st = <-p.reports:
				case <-rerun:
					o, _ := a.st.get("s1")
					t.Fatalf("the turn did not run again once the control plane answered: delivered seq %d, failed seq %d", o.DeliveredSeq, o.FailedSeq)
				}
				if o, _ := a.st.get("s1"); st == castv1.SessionState_SESSION_STATE_IDLE && o.DeliveredSeq == 3 {
					break
				}
			}
			if n := p.notices("s1", transcript.NoticeUndelivered); len(n) > 0 {
				t.Fatalf("the prompt got undelivered notices %q", n)
			}
			var with []string // the model requests holding the prompt
			for _, req := range fm.Turns() {
				users := userTexts(req)
				if all := strings.Join(users, "\n"); strings.Contains(all, "second question") {
					with = append(with, all)
					if n := strings.Count(all, "second question"); n != 1 {
						t.Fatalf("a model request holds the prompt %d times, want once; user items %q", n, users)
					}
					if n := strings.Count(all, "first question"); n != 1 {
						t.Fatalf("a model request holds the earlier message %d times, want once; user items %q", n, users)
					}
				}
			}
			if len(with) != 1 {
				t.Fatalf("%d model requests hold the prompt, want 1: %q", len(with), with)
			}
		})
	}
}

// setUpReads are turns whose set-up reads the history from the plane
// after the start report: s1 holds seqs 1-3 (a user message, the answer,
// the prompt), delivered up to 2.
var setUpReads = []struct {
	name  string
	setup func(t *testing.T, a *Daemon, p *plane)
}{
	{"first attempt", func(t *testing.T, a *Daemon, p *plane) {
		setUpSession(t, a, p, nil) // no native session: the set-up rebuilds one
	}},
	{"rerun on a rebuilt native session", func(t *testing.T, a *Daemon, p *plane) {
		// A native session the node ran, whose file is gone: the resume
		// misses and the rerun's rebuild reads the history.
		setUpSession(t, a, p, &nativeSession{ID: uuid.NewString(), KnownUpto: 2})
	}},
}

// setUpSession stores s1's rows in the plane and its node state, with
// native as its Claude native session (nil: none).
func setUpSession(t *testing.T, a *Daemon, p *plane, native *nativeSession) {
	t.Helper()
	_ = p.add("s1",
		&castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "first question", ClientId: "u1"},
		&castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "first answer", Agent: "claude", ClientId: "a1"},
		&castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "second question", ClientId: "u2"})
	cwd := t.TempDir()
	if err := a.st.assign("s1", func(o *owned) {
		o.Token, o.Agent, o.Cwd = 1, "claude", cwd
		o.ReceivedSeq, o.DeliveredSeq = 3, 2
		if native != nil {
			o.Native = map[string]*nativeSession{"claude": native}
		}
	}); err != nil {
		t.Fatal(err)
	}
}

// A set-up that failed other than by the control plane not answering
// (here the read is refused as an internal error) is held as before: the
// session shows FAILED, and FailedSeq keeps the worker from running the
// prompt again until the next message carries it.
func TestTurnWhoseSetUpFailedOtherwiseIsHeld(t *testing.T) {
	for _, tc := range setUpReads {
		t.Run(tc.name, func(t *testing.T) {
			fm := fakemodel.Start(t)
			a, p := rerunDaemon(t, fm)
			tc.setup(t, a, p)
			p.mu.Lock()
			p.readsDownOnStart, p.downCode = true, codes.Internal
			p.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			o, _ := a.st.get("s1")
			if err := a.runTurn(ctx, "s1", o); err == nil {
				t.Fatal("a turn that was not set up reported success")
			}
			if o, _ := a.st.get("s1"); o.FailedSeq != 3 || o.DeliveredSeq != 2 {
				t.Fatalf("failed seq %d, delivered seq %d; want 3 and 2 (the prompt held)", o.FailedSeq, o.DeliveredSeq)
			}
			var last castv1.SessionState
			for len(p.reports) > 0 {
				last = <-p.reports
			}
			if last != castv1.SessionState_SESSION_STATE_FAILED {
				t.Fatalf("last report %v, want FAILED", last)
			}
			// The control plane hears that the prompt waits for the next
			// message: it sends no interrupt for it (moves.RunsNothing),
			// which this node would refuse.
			if r := p.lastLanded(); r.HeldSeq != 3 {
				t.Fatalf("the FAILED report's held seq is %d, want 3 (the prompt held)", r.HeldSeq)
			}
			if n := len(fm.Turns()); n != 0 {
				t.Fatalf("%d model requests for a turn that was not set up", n)
			}
		})
	}
}

// A turn abandoned by a move stores its answer after the prompt it
// answered (seq 4 after the prompt, seq 3: the drain's rows land while the
// prompt is held). The destination rebuilds the native session with that
// answer in it and runs the prompt again. The turn after that must not send
// the agent that answer again as "what happened while you were not
// running it": the rebuilt session holds it (the delivery rule's
// model-based test, seed 20261205142, found pi's own answer twice in one
// request).
func TestRebuiltSessionHoldsTheAnswerStoredPastItsPrompt(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p := rerunDaemon(t, fm)
	const abandoned = "the answer of the turn the move abandoned"
	_ = p.add("s1",
		&castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "first question", ClientId: "u1"},
		&castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "first answer", Agent: "claude", ClientId: "a1"},
		&castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "second question", ClientId: "u2"},
		&castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: abandoned, Agent: "claude", ClientId: "a2"})
	cwd := t.TempDir()
	if err := a.st.assign("s1", func(o *owned) {
		o.Token, o.Agent, o.Cwd = 1, "claude", cwd
		o.ReceivedSeq, o.DeliveredSeq = 3, 2
		// The abandoned turn left it stale: this turn rebuilds it.
		o.Native = map[string]*nativeSession{"claude": {ID: uuid.NewString(), KnownUpto: 2, Stale: true}}
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o, _ := a.st.get("s1")
	if err := a.runTurn(ctx, "s1", o); err != nil {
		t.Fatalf("the rerun of the prompt: %v", err)
	}

	next := p.add("s1", &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "third question", ClientId: "u3"})
	if err := a.st.session("s1", func(o *owned) { o.ReceivedSeq = next[0].Seq }); err != nil {
		t.Fatal(err)
	}
	o, _ = a.st.get("s1")
	known, missing := o.Native["claude"].KnownUpto, slices.Clone(o.Native["claude"].Missing) // as the rerun left them
	if err := a.runTurn(ctx, "s1", o); err != nil {
		t.Fatalf("the next turn: %v", err)
	}
	turns := fm.Turns()
	if len(turns) == 0 {
		t.Fatal("no model request")
	}
	var items []string
	for _, it := range turns[len(turns)-1].Items {
		if it.Role != "system" && !strings.HasPrefix(it.Text, "<system-reminder>") {
			items = append(items, it.Role+": "+it.Text)
		}
	}
	if n := strings.Count(strings.Join(items, "\n"), abandoned); n != 1 {
		t.Fatalf("the next turn's request holds the abandoned turn's answer %d times, want once (the rerun left its native session known up to %d, missing %v); items %q",
			n, known, missing, items)
	}
}

// A turn whose rows the control plane refuses for good (its store past its
// quota: RESOURCE_EXHAUSTED at every append) ends: the session shows
// FAILED with the reason, and the prompt is held (FailedSeq) rather than
// run again. The node sent no end report for such a turn, so the session
// showed `running` with no process, and its worker ran the whole turn
// again after each back-off, the model answering the same prompt over and
// over for as long as the store refused. The held prompt reaches the
// model once more, exactly once, with the next message.
func TestTurnWhoseRowsAreRefusedForGoodIsHeld(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p, ctx := workerDaemon(t, fm)
	setUpSession(t, a, p, nil)
	p.mu.Lock()
	p.appendCode = codes.ResourceExhausted
	p.mu.Unlock()
	a.wake("s1")

	running := 0
	for ended := false; !ended; {
		select {
		case st := <-p.reports:
			switch st {
			case castv1.SessionState_SESSION_STATE_RUNNING:
				if running++; running > 1 {
					t.Fatal("the turn ran again with no end report between: the session showed running with no process, and the model answered the prompt again")
				}
			case castv1.SessionState_SESSION_STATE_FAILED:
				ended = true
			default:
				t.Fatalf("turn ended %s, want FAILED (its answer was not stored)", st)
			}
		case <-ctx.Done():
			t.Fatal("the turn whose rows were refused never reported its end")
		}
	}
	if o, _ := a.st.get("s1"); o.DeliveredSeq != 2 || o.FailedSeq != 3 {
		t.Fatalf("delivered seq %d, failed seq %d; want 2 and 3 (the prompt held until the next message)", o.DeliveredSeq, o.FailedSeq)
	}

	// The store takes rows again; the next message carries the held prompt.
	p.up()
	next := p.add("s1", &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "third question", ClientId: "u3"})
	if err := a.deliver("s1", 1, next); err != nil {
		t.Fatal(err)
	}
	idleAt(ctx, t, a, p, next[0].Seq)
	turns := fm.Turns()
	users := userTexts(turns[len(turns)-1])
	for _, q := range []string{"first question", "second question", "third question"} {
		if n := strings.Count(strings.Join(users, "\n"), q); n != 1 {
			t.Fatalf("the next model request holds %q %d times, want once; user items %q", q, n, users)
		}
	}
}

// userTexts are the user text items of a model request.
func userTexts(req fakemodel.Request) []string {
	var users []string
	for _, it := range req.Items {
		if it.Role == "user" && it.Kind == fakemodel.KindText {
			users = append(users, it.Text)
		}
	}
	return users
}

// The CLI of a turn run again on a rebuilt native session (the resumed one
// was gone) carries the turn's token, as the first attempt's does: a node
// killed while it runs finds it by the token on restart (stopOrphans) even
// where its process group is not the one recorded. The rerun built its
// turn anew and left CAST_TURN out, so no restart could find it by token.
func TestRerunCLICarriesTheTurnToken(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p, ctx := workerDaemon(t, fm)
	setUpSession(t, a, p, &nativeSession{ID: uuid.NewString(), KnownUpto: 2})
	answer := heldAtTheModel(ctx, t, a, fm) // the rerun's CLI waits on the model
	o, _ := a.st.get("s1")
	groups := turnGroups(o.TurnToken)
	close(answer)
	if o.TurnToken == "" || len(groups) == 0 {
		t.Fatalf("turn token %q finds no process group; want the rerun's CLI (group %d)", o.TurnToken, o.RunningPGID)
	}
	idleAt(ctx, t, a, p, 3)
}

// A node stopped (SIGTERM: its run's context ends) while a turn's CLI
// waits on the model leaves the prompt undelivered, as a kill -9 does:
// the restarted node runs it again and the model gets it once. The stop
// ended the turn as a user's interrupt, which counts the prompt as done,
// so after the restart the message was never answered.
func TestNodeStoppedMidTurnRunsThePromptAfterRestart(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p, ctx, stop := stoppableNode(t, fm)
	answer := heldAtTheModel(ctx, t, a, fm)
	stop() // the node stops
	a.workers.wg.Wait()
	close(answer)
	if o, _ := a.st.get("s1"); o.DeliveredSeq != 2 || o.FailedSeq != 0 {
		t.Fatalf("delivered seq %d, failed seq %d after the node stopped mid-turn; want 2 and 0 (the prompt runs again)", o.DeliveredSeq, o.FailedSeq)
	}
	runsThePromptOnce(ctx, t, restartedNode(ctx, t, a), p, fm)
}

// stoppableNode is rerunDaemon with s1 set up (setUpSession) and its run's
// context, which stop ends as the node's stop does; ctx bounds the test.
func stoppableNode(t *testing.T, fm *fakemodel.Server) (a *Daemon, p *plane, ctx context.Context, stop func()) {
	t.Helper()
	a, p = rerunDaemon(t, fm)
	setUpSession(t, a, p, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	a.runCtx, stop = context.WithCancel(ctx)
	return a, p, ctx, stop
}

// restartedNode is a node started again on a's data dir (a stopped).
func restartedNode(ctx context.Context, t *testing.T, a *Daemon) *Daemon {
	t.Helper()
	b, err := New(a.cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.cli.Close() })
	bctx, bstop := context.WithCancel(ctx)
	b.runCtx = bctx
	t.Cleanup(b.workers.wg.Wait)
	t.Cleanup(bstop)
	return b
}

// runsThePromptOnce wakes s1 on b and waits until b ran its prompt (the
// second question), which the model request holds once beside the first.
func runsThePromptOnce(ctx context.Context, t *testing.T, b *Daemon, p *plane, fm *fakemodel.Server) {
	t.Helper()
	fm.SetPolicy(nil)
	b.wake("s1")
	idleAt(ctx, t, b, p, 3)
	turns := fm.Turns()
	users := userTexts(turns[len(turns)-1])
	for _, q := range []string{"first question", "second question"} {
		if n := strings.Count(strings.Join(users, "\n"), q); n != 1 {
			t.Fatalf("the restarted node's model request holds %q %d times, want once; user items %q", q, n, users)
		}
	}
}

// A turn whose CLI a signal from outside ended (SIGTERM, on which Claude
// Code exits 143) is held while the node runs, and the node's next start
// runs it once, on a rebuilt native session: a service manager's stop
// signals the node and its CLIs at once, and a CLI whose exit the node saw
// before its own signal held the message after the restart too, until
// another message came (the e2e TestNodeStoppedWithItsCLIRunsTheMessageAfterRestart).
func TestKilledTurnRunsAgainWhenTheNodeStarts(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p, ctx, stop := stoppableNode(t, fm)
	answer := heldAtTheModel(ctx, t, a, fm)
	o, _ := a.st.get("s1")
	if o.RunningPGID <= 0 {
		t.Fatal("the turn's CLI has no recorded process group")
	}
	_ = syscall.Kill(-o.RunningPGID, syscall.SIGTERM) // from outside the node
	for held := false; !held; {
		select {
		case st := <-p.reports:
			if st == castv1.SessionState_SESSION_STATE_IDLE {
				t.Fatal("the killed turn ended idle")
			}
			held = st == castv1.SessionState_SESSION_STATE_FAILED
		case <-ctx.Done():
			t.Fatal("the killed turn never reported its end")
		}
	}
	close(answer)
	stop() // the node stops
	a.workers.wg.Wait()
	if o, _ := a.st.get("s1"); o.DeliveredSeq != 2 || o.FailedSeq != 3 || !o.Killed {
		t.Fatalf("delivered seq %d, failed seq %d, killed %v after the CLI was killed; want 2, 3 and true (held)", o.DeliveredSeq, o.FailedSeq, o.Killed)
	}

	b := restartedNode(ctx, t, a)
	b.runKilledAgain() // as Run does
	if o, _ := b.st.get("s1"); o.FailedSeq != 0 || o.Killed {
		t.Fatalf("failed seq %d, killed %v once the node started again; want 0 and false (released once)", o.FailedSeq, o.Killed)
	}
	runsThePromptOnce(ctx, t, b, p, fm)
}

// A turn stopped while it is set up (its set-up reads the history for a
// rebuild) ends as one stopped before its CLI started: an interrupt counts
// the prompt as done (the session idle, the next turn carrying it as
// history), the node stopping keeps it to run after the restart. Both
// were held as a turn the node could not set up: the session showed
// failed ("context canceled") and the prompt waited for the next message,
// after a restart too. A node that cannot write its state (a full disk)
// still reports the interrupted turn idle, as it reports a completed one:
// it reported nothing, and the session showed running with no process.
func TestTurnStoppedDuringItsSetUp(t *testing.T) {
	interrupt := func(a *Daemon, _ func()) { _ = a.interrupt("s1", false, "") }
	for _, tc := range []struct {
		name              string
		stop              func(a *Daemon, stopNode func())
		delivered, failed int64
	}{
		{"interrupted", interrupt, 3, 0},
		{"interrupted on a full disk", func(a *Daemon, stopNode func()) { stateUnwritable(t, a); interrupt(a, stopNode) }, 3, 0},
		{"node stopping", func(_ *Daemon, stopNode func()) { stopNode() }, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fm := fakemodel.Start(t)
			a, p := rerunDaemon(t, fm)
			setUpSession(t, a, p, nil) // no native session: the set-up reads the history
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			wctx, stopNode := context.WithCancel(ctx)
			a.runCtx = wctx
			defer a.workers.wg.Wait()
			defer stopNode()
			readIn := p.holdReadsFromStart()
			a.wake("s1")
			select {
			case <-readIn:
			case <-ctx.Done():
				t.Fatal("the turn's set-up never read the history")
			}
			tc.stop(a, stopNode)
			for ended := false; !ended; {
				select {
				case st := <-p.reports:
					if st == castv1.SessionState_SESSION_STATE_FAILED {
						t.Fatal("the stopped turn shows failed")
					}
					ended = st == castv1.SessionState_SESSION_STATE_IDLE
				case <-wctx.Done(): // stopping, the node reports nothing more
					a.workers.wg.Wait()
					ended = true
				case <-ctx.Done():
					t.Fatal("the stopped turn did not end")
				}
			}
			if o, _ := a.st.get("s1"); o.DeliveredSeq != tc.delivered || o.FailedSeq != tc.failed {
				t.Fatalf("delivered seq %d, failed seq %d; want %d and %d", o.DeliveredSeq, o.FailedSeq, tc.delivered, tc.failed)
			}
			if n := len(fm.Turns()); n != 0 {
				t.Fatalf("the model got %d requests for a turn stopped during its set-up", n)
			}
		})
	}
}

// heldAtTheModel wakes s1, whose turn asks the model, and returns once the
// model holds the request; closing the returned channel answers it.
func heldAtTheModel(ctx context.Context, t *testing.T, a *Daemon, fm *fakemodel.Server) chan struct{} {
	t.Helper()
	asked, answer := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fm.SetPolicy(func(fakemodel.Request) fakemodel.Reply {
		once.Do(func() { close(asked) })
		return fakemodel.Reply{Text: "second answer", Gate: answer}
	})
	a.wake("s1")
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("the turn never asked the model")
	}
	return answer
}

// idleAt waits for a report of s1 idle with its prompts delivered up to seq.
func idleAt(ctx context.Context, t *testing.T, a *Daemon, p *plane, seq int64) {
	t.Helper()
	for {
		var st castv1.SessionState
		select {
		case st = <-p.reports:
		case <-ctx.Done():
			o, _ := a.st.get("s1")
			t.Fatalf("s1 never idle at seq %d: delivered seq %d, failed seq %d", seq, o.DeliveredSeq, o.FailedSeq)
		}
		if o, _ := a.st.get("s1"); st == castv1.SessionState_SESSION_STATE_IDLE && o.DeliveredSeq == seq {
			return
		}
	}
}

// A node that (re)connects and is assigned a session with messages sent
// while it was away runs them even when its first read of them fails (the
// control plane not answering for a moment): the catch-up is tried again.
// Its failure was only logged by the control plane (a command's error in
// the ack), and the messages waited for the next one, or a reconnect.
func TestCatchUpAfterAFailedReadRunsTheMessages(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p, ctx := workerDaemon(t, fm)
	setUpSession(t, a, p, nil)
	// The node had been handed only the first message before it went away.
	if err := a.st.assign("s1", func(o *owned) { o.ReceivedSeq, o.DeliveredSeq = 1, 1 }); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.readsDown = true
	p.mu.Unlock()
	assign := &castv1.Command{Kind: &castv1.Command_AssignSession{AssignSession: &castv1.AssignSession{
		Session: &castv1.Session{Id: "s1", Agent: "claude", Cwd: t.TempDir(), LastSeq: 3, DeliveredSeq: 1}, OwnerToken: 1}}}
	if err := a.handle(ctx, assign); err == nil {
		t.Fatal("the catch-up read that failed reported no error")
	}
	p.up()
	idleAt(ctx, t, a, p, 3)
	turns := fm.Turns()
	if n := strings.Count(strings.Join(userTexts(turns[len(turns)-1]), "\n"), "second question"); n != 1 {
		t.Fatalf("the model's request holds the missed message %d times, want once", n)
	}
}

// stateUnwritable has every later write of a's state fail, as on a full
// disk: its file is one whose snapshot cannot be written (a name too long
// for the temporary file beside it, a real failure of the same write).
func stateUnwritable(t *testing.T, a *Daemon) {
	t.Helper()
	f, _, err := statefile.Open(filepath.Join(t.TempDir(), strings.Repeat("s", 245)+".json"), stateRecords)
	if err != nil {
		t.Fatal(err)
	}
	a.st.mu.Lock()
	defer a.st.mu.Unlock()
	_ = a.st.file.Close()
	a.st.file = f
}

// A turn parked on a usage limit keeps its prompt for the next credential
// (or the next message) and runs nothing meanwhile, as a failed turn that
// held its message does: the PARKED report says which messages it holds,
// so the control plane sends no interrupt for them (moves.RunsNothing),
// which this node would refuse ("no running turn"), each side logging a
// warning.
func TestParkedTurnReportsItsHeldSeq(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p := rerunDaemon(t, fm)
	setUpSession(t, a, p, nil)
	fm.FailNext(10, 429)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o, _ := a.st.get("s1")
	if err := a.runTurn(ctx, "s1", o); err == nil {
		t.Fatal("a turn on a usage limit reported success")
	}
	if o, _ := a.st.get("s1"); !o.Parked || o.FailedSeq != 3 || o.DeliveredSeq != 2 {
		t.Fatalf("parked %v, failed seq %d, delivered seq %d; want parked holding the prompt (3 and 2)", o.Parked, o.FailedSeq, o.DeliveredSeq)
	}
	r := p.lastLanded()
	if r.State != castv1.SessionState_SESSION_STATE_PARKED || r.HeldSeq != 3 {
		t.Fatalf("last report %v with held seq %d; want PARKED holding the prompt (3)", r.State, r.HeldSeq)
	}
	if a.interrupt("s1", false, "") == nil {
		t.Fatal("the node took an interrupt for a parked session, which runs nothing")
	}
}

// A turn whose start the control plane refuses because the session was
// switched to another agent first (AGENT_SWITCHED: a parked turn a fleet
// credential woke as the switch came) is held: its agent does not run,
// its prompt is neither failed nor delivered, and the switch's assignment
// wakes the session to run it on the new agent. The start names the
// turn's agent, which the store checks; it named none, so the old agent
// ran the prompt after the switch.
func TestStartRefusedForASwitchedAgentIsHeld(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p := rerunDaemon(t, fm)
	setUpSession(t, a, p, nil)
	p.mu.Lock()
	p.switchedTo = "pi"
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o, _ := a.st.get("s1")
	if err := a.runTurn(ctx, "s1", o); !errors.Is(err, errHeld) {
		t.Fatalf("a start refused for a switched agent: %v; want the turn held", err)
	}
	if n := fm.TurnsStarted(); n != 0 {
		t.Fatalf("%d model requests; the old agent ran after the switch", n)
	}
	if now, _ := a.st.get("s1"); now.DeliveredSeq != o.DeliveredSeq || now.FailedSeq != o.FailedSeq {
		t.Fatalf("delivered seq %d, failed seq %d; want the prompt waiting (%d, %d)", now.DeliveredSeq, now.FailedSeq, o.DeliveredSeq, o.FailedSeq)
	}
	p.mu.Lock()
	p.switchedTo = "claude" // a start naming claude lands
	p.mu.Unlock()
	if err := a.runTurn(ctx, "s1", o); err != nil {
		t.Fatalf("the start naming the session's agent: %v", err)
	}
}
