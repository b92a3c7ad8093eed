package e2e

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// Ten tool outputs of the max message size (84 MB in one page before pages
// were bounded in bytes) are read whole by ListMessages, ExportSession,
// WatchSession's replay and `cast read`, every reply under the clients'
// receive limit. The control plane is the real binary (its embedded etcd
// is not slowed by the race detector).
func TestLargeSessionIsReadWhole(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	addr := freeAddr(t)
	startDev(t, bins, t.TempDir(), addr)
	c := testharness.Dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var sess *castv1.Session
	testharness.WaitFor(t, 30*time.Second, "a session created", func() bool {
		var err error
		sess, err = c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir()})
		return err == nil
	})
	const n = 10
	size := store.DefaultMaxMessageBytes - 4<<10
	want := make([]string, n)
	for i := range n {
		want[i] = strings.Repeat(string(rune('a'+i)), size)
		m := &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT,
			ToolResult: &castv1.ToolResult{CallId: fmt.Sprint("call", i), Output: want[i]}}
		if _, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: []*castv1.Message{m}}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	// seen checks a read got every message once, in order, byte-exact.
	seen := func(how string, msgs []*castv1.Message) {
		t.Helper()
		if len(msgs) != n {
			t.Fatalf("%s: %d messages, want %d", how, len(msgs), n)
		}
		for i, m := range msgs {
			if m.Seq != int64(i+1) || m.ToolResult.GetOutput() != want[i] {
				t.Fatalf("%s: message %d (seq %d) differs", how, i, m.Seq)
			}
		}
	}
	under := func(how string, reply proto.Message) {
		t.Helper()
		if sz := proto.Size(reply); sz > client.MaxReplyBytes {
			t.Fatalf("%s: a reply of %d bytes, over the %d limit", how, sz, client.MaxReplyBytes)
		}
	}

	var listed []*castv1.Message
	for tok := ""; ; {
		resp, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id, PageToken: tok})
		if err != nil {
			t.Fatalf("ListMessages: %v", err)
		}
		under("ListMessages", resp)
		listed = append(listed, resp.Messages...)
		if tok = resp.NextPageToken; tok == "" {
			break
		}
	}
	seen("ListMessages", listed)

	stream, err := c.Sessions.ExportSession(ctx, &castv1.ExportSessionRequest{SessionId: sess.Id})
	if err != nil {
		t.Fatal(err)
	}
	var exported []*castv1.Message
	for {
		p, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("ExportSession: %v", err)
		}
		under("ExportSession", p)
		exported = append(exported, p.Messages...)
	}
	seen("ExportSession", exported)

	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watch, err := c.Sessions.WatchSession(wctx, &castv1.WatchSessionRequest{SessionId: sess.Id, StartSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	var replayed []*castv1.Message
	for len(replayed) < n {
		ev, err := watch.Recv()
		if err != nil {
			t.Fatalf("WatchSession: %v", err)
		}
		if m := ev.GetMessage(); m != nil {
			replayed = append(replayed, m)
		}
	}
	seen("WatchSession", replayed)
	wcancel()

	out, errOut, code := testharness.Run(t, []string{"CAST_ADDR=" + addr}, filepath.Join(bins, "cast"), "read", sess.Id)
	if code != 0 {
		t.Fatalf("cast read: exit %d: %s", code, errOut)
	}
	for i := range n {
		head := fmt.Sprintf("#%d tool_result\n", i+1)
		at := strings.Index(out, head)
		if at < 0 {
			t.Fatalf("cast read lacks seq %d", i+1)
		}
		if body := out[at+len(head):]; !strings.Contains(body[:min(len(body), size+64)], want[i]) {
			t.Fatalf("cast read: seq %d differs", i+1)
		}
	}
}
