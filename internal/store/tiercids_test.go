package store_test

import (
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/objstore"
	"github.com/cast-dev/cast/internal/testharness"
)

// TestRetryAfterTieringIsRecognised: a retry of a message moved to a
// segment, within the dedupe window, gets the stored message back and
// stores nothing; once the window passed, the moved messages' client id
// records leave etcd (those of the hot tail stay).
func TestRetryAfterTieringIsRecognised(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, smallChunks)
	cli := etcdClient(t, ep)
	objs, err := objstore.NewFolder(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tc := tierTestConfig()
	tc.DedupeWindow = 3 * time.Hour
	if err := s.UseObjects(objs, tc, nil); err != nil {
		t.Fatal(err)
	}
	c := newSession(t, s, "n1")
	want := appendN(t, s, c.Session.Id, 120, "a")
	first, _, err := s.ListMessages(ctxT(t), c.Session.Id, 1, 1, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if moved, err := s.TierAt(ctxT(t), now); err != nil || moved < 70 {
		t.Fatalf("moved %d, %v; want at least the 70 older than the hot tail", moved, err)
	}
	retry := func(when string) {
		t.Helper()
		m := &castv1.Message{ClientId: first[0].ClientId, Kind: first[0].Kind, Text: first[0].Text}
		got, err := s.Append(ctxT(t), c.Session.Id, []*castv1.Message{m}, fence.Guard{})
		if err != nil || got[0].Seq != 1 || !got[0].CreateTime.AsTime().Equal(first[0].CreateTime.AsTime()) {
			t.Fatalf("retry of moved message 1 %s = %v, %v; want message 1 as stored", when, got, err)
		}
		checkWhole(t, s, c.Session.Id, want)
	}
	retry("just after the move")
	if n := testharness.CountKeys(t, cli, "cids/"); n != 120 {
		t.Fatalf("%d client id records within the window; want all 120", n)
	}
	// Still within the window, a prune later (an hour on): nothing
	// pruned, and the retry is still recognised.
	if _, err := s.TierAt(ctxT(t), now.Add(61*time.Minute)); err != nil {
		t.Fatal(err)
	}
	retry("within the window")
	if n := testharness.CountKeys(t, cli, "cids/"); n != 120 {
		t.Fatalf("%d client id records within the window; want all 120", n)
	}
	// Past it, the records of every moved message leave etcd; the hot
	// tail's stay, and the transcript is whole.
	if _, err := s.TierAt(ctxT(t), now.Add(4*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n, inEtcd := testharness.CountKeys(t, cli, "cids/"), testharness.CountKeys(t, cli, "msgs/"); n != inEtcd || n == 0 || n >= 120 {
		t.Fatalf("%d client id records past the window, %d messages in etcd; want one per message in etcd", n, inEtcd)
	}
	checkWhole(t, s, c.Session.Id, want)
	// A retry past the window is a new message: the documented limit of
	// the window (DedupeWindow).
	m := &castv1.Message{ClientId: first[0].ClientId, Kind: first[0].Kind, Text: first[0].Text}
	got, err := s.Append(ctxT(t), c.Session.Id, []*castv1.Message{m}, fence.Guard{})
	if err != nil || got[0].Seq != 121 {
		t.Fatalf("retry past the window = %v, %v; want a new message 121", got, err)
	}
}
