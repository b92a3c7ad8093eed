package controlplane_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// wantRefusal checks err is INVALID_ARGUMENT with reason INVALID_ARGUMENT
// and names field in its ErrorInfo.
func wantRefusal(t *testing.T, what string, err error, field string) {
	t.Helper()
	st, _ := status.FromError(err)
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if st.Code() != codes.InvalidArgument || info == nil || info.Reason != "INVALID_ARGUMENT" || info.Metadata["field"] != field {
		t.Errorf("%s: got %v (info %v), want INVALID_ARGUMENT naming field %q", what, err, info, field)
		return
	}
	if len(st.Message()) > 400 || strings.ContainsAny(st.Message(), "\n\x00") {
		t.Errorf("%s: message is not one short line: %q", what, st.Message())
	}
}

// Fields a client sets are refused at the API, through real gRPC, before
// anything is stored; each refusal names the field. Each of these was
// accepted before (and wedged a session, reached an argv or broke `cast
// ls`).
func TestClientFieldsAreValidatedAtTheEdge(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	cmds := rawNode(t, c, "n1")
	waitConnected(t, c, "n1", true)
	ctx := ctxT(t)

	creates := []struct {
		name  string
		req   *castv1.CreateSessionRequest
		field string
	}{
		{"model read as a flag", &castv1.CreateSessionRequest{Agent: "claude", Model: "--dangerously-skip-permissions"}, "model"},
		{"model with NUL", &castv1.CreateSessionRequest{Agent: "claude", Model: "opus\x00"}, "model"},
		{"1 MiB title", &castv1.CreateSessionRequest{Agent: "claude", Title: strings.Repeat("t", 1<<20)}, "title"},
		{"title with escape", &castv1.CreateSessionRequest{Agent: "claude", Title: "red \x1b[31m"}, "title"},
		{"cwd with newline", &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp/a\nb"}, "cwd"},
		{"relative cwd", &castv1.CreateSessionRequest{Agent: "claude", Cwd: "tmp"}, "cwd"},
		{"NUL in first message", &castv1.CreateSessionRequest{Agent: "claude", Text: "hi\x00there"}, "text"},
		{"runaway history", &castv1.CreateSessionRequest{Agent: "claude", HistoryMessages: math.MaxInt64}, "history_messages"},
		// Branches git refuses: taken, the session was stored and every
		// turn failed on the node's `git check-ref-format`.
		{"branch component ending .lock", &castv1.CreateSessionRequest{Agent: "claude", WorktreeBranch: "fix.lock/x"}, "worktree_branch"},
		{"branch HEAD", &castv1.CreateSessionRequest{Agent: "claude", WorktreeBranch: "HEAD"}, "worktree_branch"},
	}
	for _, tc := range creates {
		_, err := c.Sessions.CreateSession(ctx, tc.req)
		wantRefusal(t, tc.name, err, tc.field)
	}
	list, err := c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{IncludeSubagents: true})
	if err != nil || len(list.Sessions) != 0 {
		t.Fatalf("refused creates left sessions: %v %v", list.GetSessions(), err)
	}

	// Named: a hand-driven node answers no placement question (where /tmp is).
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Model: "claude-sonnet-4-5", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	token := nextCommand(t, cmds, func(cmd *castv1.Command) bool {
		return cmd.GetAssignSession().GetSession().GetId() == sess.Id
	}).GetAssignSession().OwnerToken
	_, err = c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: "a\x00b"})
	wantRefusal(t, "NUL in text", err, "text")
	_, err = c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: []*castv1.Message{{
		ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "from the future",
		CreateTime: timestamppb.New(time.Now().Add(24 * time.Hour))}}})
	wantRefusal(t, "future create_time", err, "messages[0].create_time")
	// The paths are formatted only for a refusal: a later message's fields
	// are named with its index, its kind too.
	_, err = c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: []*castv1.Message{
		{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "fine"},
		{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "fine", Agent: "two\nlines"}}})
	wantRefusal(t, "bad agent in the second message", err, "messages[1].agent")
	_, err = c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: []*castv1.Message{
		{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "fine"},
		{ClientId: ids.NewClientID(), Kind: castv1.MessageKind(999), Text: "fine"}}})
	wantRefusal(t, "unknown kind in the second message", err, "messages[1].kind")
	// An owner's row from a fast clock is stamped by the server instead:
	// refusing it would wedge the node's sync.
	fast, err := c.Nodes.AppendOwnerMessages(ctx, &castv1.AppendOwnerMessagesRequest{SessionId: sess.Id, Node: "n1", OwnerToken: token,
		Messages: []*castv1.Message{{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "fast clock",
			CreateTime: timestamppb.New(time.Now().Add(24 * time.Hour))}}})
	if err != nil || fast.Messages[0].CreateTime.AsTime().After(time.Now().Add(time.Minute)) {
		t.Fatalf("owner row with a future time: %v %v", fast, err)
	}
	_, err = c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: sess.Id, Effort: "-x"})
	wantRefusal(t, "effort read as a flag", err, "effort")
	sent, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}

	report := func(r *castv1.ReportTurnRequest) error {
		r.SessionId, r.Node, r.OwnerToken = sess.Id, "n1", token
		if r.State == 0 {
			r.State = castv1.SessionState_SESSION_STATE_IDLE
		}
		_, err := c.Nodes.ReportTurn(ctx, r)
		return err
	}
	wantRefusal(t, "delivered_seq MaxInt64", report(&castv1.ReportTurnRequest{DeliveredSeq: math.MaxInt64}), "delivered_seq")
	wantRefusal(t, "delivered_seq past the last", report(&castv1.ReportTurnRequest{DeliveredSeq: sent.Message.Seq + 1}), "delivered_seq")
	wantRefusal(t, "NaN usage", report(&castv1.ReportTurnRequest{FleetAccount: "work",
		Usage: []*castv1.UsageWindow{{Name: "primary", UsedPercent: math.NaN()}}}), "usage[0].used_percent")
	wantRefusal(t, "Inf usage", report(&castv1.ReportTurnRequest{FleetAccount: "work",
		Usage: []*castv1.UsageWindow{{Name: "primary", UsedPercent: math.Inf(1)}}}), "usage[0].used_percent")
	wantRefusal(t, "usage model with a space", report(&castv1.ReportTurnRequest{FleetAccount: "work",
		Usage: []*castv1.UsageWindow{{Name: "seven_day_opus", Model: "opus 4"}}}), "usage[0].model")
	wantRefusal(t, "state out of range", report(&castv1.ReportTurnRequest{State: 99}), "state")
	wantRefusal(t, "reported cwd with newline", report(&castv1.ReportTurnRequest{Cwd: "/tmp/x\n"}), "cwd")
	wantRefusal(t, "held_seq past the last", report(&castv1.ReportTurnRequest{State: castv1.SessionState_SESSION_STATE_FAILED,
		HeldSeq: sent.Message.Seq + 1}), "held_seq")
	wantRefusal(t, "interrupted failure", report(&castv1.ReportTurnRequest{State: castv1.SessionState_SESSION_STATE_FAILED,
		Interrupted: true}), "interrupted")
	wantRefusal(t, "abandoned failure", report(&castv1.ReportTurnRequest{State: castv1.SessionState_SESSION_STATE_FAILED,
		Abandoned: true}), "abandoned")
	wantRefusal(t, "abandoned and interrupted", report(&castv1.ReportTurnRequest{State: castv1.SessionState_SESSION_STATE_IDLE,
		Abandoned: true, Interrupted: true}), "abandoned")

	// The session is untouched and still delivers: a cursor within the
	// session is accepted.
	got, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
	if err != nil || got.DeliveredSeq != 0 || got.Title != "" || got.Cwd != "/tmp" {
		t.Fatalf("session after refusals: %v %v", got, err)
	}
	if err := report(&castv1.ReportTurnRequest{DeliveredSeq: sent.Message.Seq}); err != nil {
		t.Fatalf("a delivered_seq within the session: %v", err)
	}
	if r := client.ReasonOf(report(&castv1.ReportTurnRequest{DeliveredSeq: -1})); r != "INVALID_ARGUMENT" {
		t.Fatalf("negative delivered_seq: reason %q", r)
	}
}
