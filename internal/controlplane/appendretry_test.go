package controlplane_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
)

// `cast send` retries with its request id after a timeout: a retried 300 KiB
// message comes back as committed and stays readable; the same request id
// with another text is refused with a reason, never echoed back.
func TestRetriedLargeSendStaysReadable(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex"})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("tool output line ✓\n", 300<<10/20)
	req := &castv1.SendMessageRequest{SessionId: sess.Id, Text: text, RequestId: ids.NewClientID()}
	a, err := c.Sessions.SendMessage(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Sessions.SendMessage(ctx, req)
	if err != nil || b.Message.Seq != a.Message.Seq || !b.Message.CreateTime.AsTime().Equal(a.Message.CreateTime.AsTime()) {
		t.Fatalf("retry: %v; want seq %d created %v", err, a.Message.Seq, a.Message.CreateTime.AsTime())
	}
	_, err = c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: "another text", RequestId: req.RequestId})
	if status.Code(err) != codes.AlreadyExists || client.ReasonOf(err) != "CLIENT_ID_REUSED" || client.MetadataOf(err, "client_id") != req.RequestId {
		t.Fatalf("reused request id: %v (reason %q), want ALREADY_EXISTS CLIENT_ID_REUSED naming the id", err, client.ReasonOf(err))
	}
	resp, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id})
	if err != nil || len(resp.Messages) != 1 || resp.Messages[0].Text != text {
		t.Fatalf("read after retries: %d messages, %v", len(resp.GetMessages()), err)
	}
}
