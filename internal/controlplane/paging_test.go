package controlplane_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// TestLargeSessionIsReadWhole: ten tool outputs of the max message size
// (84 MB in one page before pages were bounded in bytes) are read whole by
// ListMessages, ExportSession and `cast read`, every reply under the
// clients' receive limit.
func TestLargeSessionIsReadWhole(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.EtcdEndpoints = []string{ep} })
	st := testharness.OpenStore(t, ep, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := st.RegisterNode(ctx, &castv1.Node{Name: "n1"}, "test", time.Minute); err != nil {
		t.Fatal(err)
	}
	created, err := st.CreateSession(ctx, store.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	id := created.Session.Id
	const n = 10
	size := store.DefaultMaxMessageBytes - 4<<10
	want := map[int64]byte{}
	for i := range n {
		m := &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT,
			ToolResult: &castv1.ToolResult{CallId: fmt.Sprint("call", i), Output: strings.Repeat(string(rune('a'+i)), size)}}
		got, err := st.Append(ctx, id, []*castv1.Message{m}, store.Guard{})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		want[got[0].Seq] = byte('a' + i)
	}
	sess, err := st.GetSession(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// seen checks a read got every seq once, in order, byte-exact.
	seen := func(how string, msgs []*castv1.Message) {
		t.Helper()
		if int64(len(msgs)) != sess.LastSeq {
			t.Fatalf("%s: %d messages, want %d", how, len(msgs), sess.LastSeq)
		}
		for i, m := range msgs {
			if m.Seq != int64(i+1) {
				t.Fatalf("%s: message %d has seq %d", how, i, m.Seq)
			}
			if b, ok := want[m.Seq]; ok && m.ToolResult.GetOutput() != strings.Repeat(string(b), size) {
				t.Fatalf("%s: seq %d differs", how, m.Seq)
			}
		}
	}
	under := func(how string, reply proto.Message) {
		t.Helper()
		if sz := proto.Size(reply); sz > client.MaxReplyBytes {
			t.Fatalf("%s: a reply of %d bytes, over the %d limit", how, sz, client.MaxReplyBytes)
		}
	}
	c := testharness.Dial(t, srv.Addr())

	var listed []*castv1.Message
	for tok := ""; ; {
		resp, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: id, PageToken: tok})
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

	stream, err := c.Sessions.ExportSession(ctx, &castv1.ExportSessionRequest{SessionId: id})
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

	cast := testharness.Binaries(t) + "/cast"
	out, errOut, code := testharness.Run(t, []string{"HOME=" + t.TempDir(), "CAST_ADDR=" + srv.Addr()}, cast, "read", id)
	if code != 0 {
		t.Fatalf("cast read: exit %d: %s", code, errOut)
	}
	for seq, b := range want {
		head := fmt.Sprintf("#%d tool_result\n", seq)
		i := strings.Index(out, head)
		if i < 0 {
			t.Fatalf("cast read lacks seq %d", seq)
		}
		if body := out[i+len(head):]; !strings.Contains(body[:min(len(body), size+64)], strings.Repeat(string(b), size)) {
			t.Fatalf("cast read: seq %d differs", seq)
		}
	}
}

// The control plane refuses page and message sizes whose replies could
// pass the clients' receive limit.
func TestConfigKeepsRepliesUnderTheReceiveLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		page, msg int
		ok        bool
	}{
		{"defaults", 0, 0, true},
		{"pages of 32 MiB", 32 << 20, 0, true},
		{"pages of the limit", client.MaxReplyBytes, 0, false},
		{"messages of the limit", 0, client.MaxReplyBytes, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testharness.ControlPlaneConfig(t)
			if tc.page > 0 {
				cfg.Store.PageBytes = tc.page
			}
			if tc.msg > 0 {
				cfg.Store.MaxMessageBytes, cfg.MaxRecvBytes = tc.msg, tc.msg
			}
			err := cfg.Validate()
			if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "receive limit")) {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
