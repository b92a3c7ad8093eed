package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/objstore"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// tierTestConfig is a small policy: a short hot tail and small segments.
func tierTestConfig() store.TierConfig {
	c := store.DefaultTierConfig()
	c.HotMessages, c.MinSegment, c.SegmentMessages, c.PartTail = 50, 10, 100, 5
	c.PartBytes = 4 << 10
	return c
}

// folderTiered is a store on etcd whose history moves to the folder
// store at dir (hook: its fault points).
func folderTiered(t *testing.T, etcd, dir string, hook func(string)) *store.Store {
	s := testharness.OpenStore(t, etcd, smallChunks)
	objs, err := objstore.NewFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UseObjects(objs, tierTestConfig(), hook); err != nil {
		t.Fatal(err)
	}
	return s
}

// smallChunks makes messages over 1 KiB chunked, so large parts are cheap.
func smallChunks(c *store.Config) { c.ChunkBytes, c.PageBytes = 1024, 64<<10 }

// appendN appends n messages to session id (every tenth one large) and
// returns their texts in order.
func appendN(t *testing.T, s *store.Store, id string, n int, tag string) []string {
	t.Helper()
	var texts []string
	for lo := 0; lo < n; lo += 20 {
		var batch []*castv1.Message
		for i := lo; i < min(n, lo+20); i++ {
			text := fmt.Sprintf("%s-%d ", tag, i)
			if i%10 == 3 {
				text += strings.Repeat("large part ", 600) // ~6.6 KiB: chunked, a large part
			}
			texts = append(texts, text)
			batch = append(batch, userMsg(text))
		}
		if _, err := s.Append(ctxT(t), id, batch, fence.Guard{}); err != nil {
			t.Fatal(err)
		}
	}
	return texts
}

// checkWhole exports session id and checks it holds exactly want, in
// order, each once; it also pages through ListMessages in small pages.
func checkWhole(t *testing.T, s *store.Store, id string, want []string) {
	t.Helper()
	var got []string
	err := s.Export(ctxT(t), id, func(_ *castv1.Session, msgs []*castv1.Message) error {
		for _, m := range msgs {
			if m.Seq != int64(len(got)+1) {
				return fmt.Errorf("message %d has seq %d", len(got)+1, m.Seq)
			}
			got = append(got, m.Text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("export has %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d = %.30q, want %.30q", i+1, got[i], want[i])
		}
	}
	var paged int
	for tok, first := "", true; first || tok != ""; first = false {
		msgs, next, err := s.ListMessages(ctxT(t), id, 0, 0, 7, tok)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			paged++
			if m.Seq != int64(paged) || m.Text != want[paged-1] {
				t.Fatalf("page message %d has seq %d", paged, m.Seq)
			}
		}
		tok = next
	}
	if paged != len(want) {
		t.Fatalf("pages hold %d messages, want %d", paged, len(want))
	}
}

func TestTierMovesHistoryAndReadsSeeOneTranscript(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), smallChunks)
	objs, err := objstore.NewFolder(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UseObjects(objs, tierTestConfig(), nil); err != nil {
		t.Fatal(err)
	}
	c := newSession(t, s, "n1")
	want := appendN(t, s, c.Session.Id, 400, "a")
	moved, err := s.Tier(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	// Everything but the hot tail, plus the large parts in it older than
	// the part tail.
	if moved < 350 {
		t.Fatalf("moved %d messages, want at least 350", moved)
	}
	checkWhole(t, s, c.Session.Id, want)
	// A retry of a moved message is answered as committed, not stored again.
	first, _, err := s.ListMessages(ctxT(t), c.Session.Id, 1, 1, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	retry := &castv1.Message{ClientId: first[0].ClientId, Kind: first[0].Kind, Text: first[0].Text}
	if got, err := s.Append(ctxT(t), c.Session.Id, []*castv1.Message{retry}, fence.Guard{}); err != nil || got[0].Seq != 1 {
		t.Fatalf("retry of moved message 1 = %v, %v", got, err)
	}
	retry = &castv1.Message{ClientId: first[0].ClientId, Kind: first[0].Kind, Text: "another body"}
	if _, err := s.Append(ctxT(t), c.Session.Id, []*castv1.Message{retry}, fence.Guard{}); !errs.HasReason(err, errs.ReasonClientIDReused) {
		t.Fatalf("reuse of a moved message's client id = %v", err)
	}
	checkWhole(t, s, c.Session.Id, want)
	// Appends go on after a move; a second round moves the new history.
	want = append(want, appendN(t, s, c.Session.Id, 200, "b")...)
	if _, err := s.Tier(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	checkWhole(t, s, c.Session.Id, want)
	// Nothing to sweep: every segment is pointed at.
	if n, err := s.SweepSegments(ctxT(t), time.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("sweep = %d, %v; want 0 orphans", n, err)
	}
	// A purge deletes the session's segments with it: none is left for
	// the sweep, and the object store is empty.
	if err := s.PurgeSession(ctxT(t), c.Session.Id, func(*castv1.Session) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SweepSegments(ctxT(t), time.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("sweep after purge = %d, %v; want nothing left to sweep", n, err)
	}
	left := 0
	if err := objs.List(ctxT(t), "", func(string, time.Time) error { left++; return nil }); err != nil || left != 0 {
		t.Fatalf("%d objects left after the purge (%v)", left, err)
	}
}

var _ store.Objects = (*objstore.Folder)(nil)

// TestTierConcurrentMoveLosesTheRace has a second replica move the same
// run while the first is between its verified write and its txn: the
// first's txn fails its compare, nothing is there twice, and its segment
// is an orphan the sweep deletes.
func TestTierConcurrentMoveLosesTheRace(t *testing.T) {
	etcd := testharness.StartEtcd(t, nil)
	dir := t.TempDir()
	open := func(hook func(string)) *store.Store { return folderTiered(t, etcd, dir, hook) }
	other := open(nil)
	raced := false
	var otherErr error
	first := open(func(name string) {
		if name == store.FailAfterVerify && !raced {
			raced = true
			_, otherErr = other.Tier(ctxT(t))
		}
	})
	c := newSession(t, first, "n1")
	want := appendN(t, first, c.Session.Id, 300, "r")
	if _, err := first.Tier(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !raced || otherErr != nil {
		t.Fatalf("the other replica did not race (%v, %v)", raced, otherErr)
	}
	checkWhole(t, first, c.Session.Id, want)
	if n, err := first.SweepSegments(ctxT(t), time.Now().Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("sweep deleted %d segments (%v), want the loser's one", n, err)
	}
	checkWhole(t, other, c.Session.Id, want)
}

// TestTierMovesLargePartsThenIdleSessions: in a session shorter than its
// hot tail, large parts move alone once PartTail messages follow them;
// once the session is idle for IdleAge, the rest moves too.
func TestTierMovesLargePartsThenIdleSessions(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), smallChunks)
	objs, err := objstore.NewFolder(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := tierTestConfig()
	if err := s.UseObjects(objs, cfg, nil); err != nil {
		t.Fatal(err)
	}
	c := newSession(t, s, "n1")
	want := appendN(t, s, c.Session.Id, 30, "p") // large: seqs 4, 14, 24
	now := time.Now()
	if n, err := s.TierSession(ctxT(t), c.Session.Id, 30, now); err != nil || n != 3 {
		t.Fatalf("first round moved %d (%v), want the 3 large parts", n, err)
	}
	checkWhole(t, s, c.Session.Id, want)
	if n, err := s.TierSession(ctxT(t), c.Session.Id, 30, now.Add(cfg.IdleAge-time.Second)); err != nil || n != 0 {
		t.Fatalf("round before the idle age moved %d (%v)", n, err)
	}
	if n, err := s.TierSession(ctxT(t), c.Session.Id, 30, now.Add(cfg.IdleAge)); err != nil || n != 27 {
		t.Fatalf("idle round moved %d (%v), want the other 27", n, err)
	}
	checkWhole(t, s, c.Session.Id, want)
	want = append(want, appendN(t, s, c.Session.Id, 5, "q")...)
	checkWhole(t, s, c.Session.Id, want)
}
