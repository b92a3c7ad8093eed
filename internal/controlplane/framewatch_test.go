package controlplane_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// The fan-out benchmark's frame-level client (testharness.FrameConn)
// against a real control plane: every watch over two connections gets
// every appended seq once, in order, including messages larger than a
// frame; a watch with a token the control plane does not know is refused
// with its status, and the others go on.
func TestFrameConnWatchesGetEverySeqOnce(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	admin := testharness.Dial(t, srv.Addr())
	testharness.StartNode(t, srv.Addr(), "n1", nil)
	waitConnected(t, admin, "n1", true)
	ctx := ctxFor(t, 2*time.Minute)
	sess, err := admin.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	const watches, appends = 6, 5
	var mu sync.Mutex
	got := make([][]int64, watches+1) // the last: the refused watch
	onSeq := func(w int, seq int64, _ time.Time) {
		mu.Lock()
		got[w] = append(got[w], seq)
		mu.Unlock()
	}
	var conns []*testharness.FrameConn
	for range 2 {
		c, err := testharness.DialFrames(srv.Addr(), testharness.AdminToken(), onSeq)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	for w := range watches {
		if err := conns[w%2].Watch(w, &castv1.WatchSessionRequest{SessionId: sess.Id}); err != nil {
			t.Fatalf("watch %d: %v", w, err)
		}
	}
	refused, err := testharness.DialFrames(srv.Addr(), "not-a-token", onSeq)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { refused.Close() })
	if err := refused.Watch(watches, &castv1.WatchSessionRequest{SessionId: sess.Id}); err == nil || !strings.Contains(err.Error(), "grpc-status 16") {
		t.Fatalf("a watch with an unknown token: %v, want grpc-status 16 (Unauthenticated)", err)
	}

	var want []int64
	for i := range appends {
		text := strings.Repeat("z", 1+i*10_000) // the last ones span several frames
		resp, err := admin.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: []*castv1.Message{
			{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Agent: "claude", Text: text}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resp.Messages {
			want = append(want, m.Seq)
		}
	}
	testharness.WaitFor(t, time.Minute, "every watch has every seq", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range got[:watches] {
			if len(g) < len(want) {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for w, g := range got {
		if w < watches && !slices.Equal(g, want) {
			t.Errorf("watch %d got seqs %v, want %v", w, g, want)
		}
	}
	if len(got[watches]) != 0 {
		t.Errorf("the refused watch got %v", got[watches])
	}
}
