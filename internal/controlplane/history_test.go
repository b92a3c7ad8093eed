package controlplane_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// History beyond etcd through the API: with an object store configured,
// the control plane's own tiering moves a session's older messages to
// segments, and the export stream, the pager (as the history tool and
// `cast read` use it) and a watch's replay still see every message once,
// in order.
func TestHistoryBeyondEtcdThroughTheAPI(t *testing.T) {
	dir := t.TempDir()
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.Objects.Folder = dir
		c.Tier.HotMessages, c.Tier.MinSegment, c.Tier.SegmentMessages, c.Tier.Every = 20, 10, 50, 50*time.Millisecond
	})
	c := testharness.Dial(t, srv.Addr())
	cmds := rawNode(t, c, "n1")
	go func() { // the node takes no part: its commands are dropped
		for range cmds {
		}
	}()
	waitConnected(t, c, "n1", true)
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for lo := 0; lo < n; lo += 50 {
		var batch []*castv1.Message
		for i := lo; i < lo+50; i++ {
			batch = append(batch, &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: fmt.Sprint("h", i+1)})
		}
		if _, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: batch}); err != nil {
			t.Fatal(err)
		}
	}
	// 280 messages older than the hot tail: 6 segments of at most 50.
	testharness.WaitFor(t, 30*time.Second, "history moved to segments", func() bool {
		entries, _ := os.ReadDir(filepath.Join(dir, "segments"))
		return len(entries) >= 6
	})
	check := func(what string, seq int64, text string, next *int64) {
		t.Helper()
		if seq != *next || text != fmt.Sprint("h", *next) {
			t.Fatalf("%s: message %d is seq %d %q", what, *next, seq, text)
		}
		*next++
	}
	stream, err := c.Sessions.ExportSession(ctx, &castv1.ExportSessionRequest{SessionId: sess.Id})
	if err != nil {
		t.Fatal(err)
	}
	next := int64(1)
	for {
		p, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Messages {
			check("export", m.Seq, m.Text, &next)
		}
	}
	if next != n+1 {
		t.Fatalf("export ended at %d", next)
	}
	next = 1
	for tok, first := "", true; first || tok != ""; first = false {
		resp, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id, PageSize: 33, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resp.Messages {
			check("pages", m.Seq, m.Text, &next)
		}
		tok = resp.NextPageToken
	}
	if next != n+1 {
		t.Fatalf("pages ended at %d", next)
	}
	watch, err := c.Sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: sess.Id, StartSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	for next = 1; next <= n; {
		ev, err := watch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m := ev.GetMessage(); m != nil {
			check("watch", m.Seq, m.Text, &next)
		}
	}
}
