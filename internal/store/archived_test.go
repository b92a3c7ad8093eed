package store_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// archiveSession does what archive.Archive (`cast rm`) does to the store.
func archiveSession(ctx context.Context, s *store.Store, id string) error {
	_, err := s.UpdateSession(ctx, id, func(sess *castv1.Session) error {
		sess.Archived = true
		return nil
	})
	return err
}

// wantArchived fails t unless err is the refusal of a message to an
// archived session.
func wantArchived(t *testing.T, what string, err error) {
	t.Helper()
	e, ok := errs.As(err)
	if !ok || e.Kind != errs.KindFailedPrecondition || e.Reason != errs.ReasonSessionArchived {
		t.Fatalf("%s: %v; want FAILED_PRECONDITION SESSION_ARCHIVED", what, err)
	}
}

// sent is the guard of a message sent to a session (fence.Guard.Open).
var sent = fence.Guard{Open: true}

// An archive (`cast rm`) that commits after an open-only append was planned
// but before its txn must refuse the append: the txn itself tells the
// session changed, not a read of the record made before it (a send to a
// session being archived stored a user message in it, which its owner then
// ran). The refusal costs one read after the failed txn, with no try
// charged again and again; the next append is refused from one read.
func TestArchiveBetweenPlanAndCommitRefusesTheAppend(t *testing.T) {
	for _, tc := range []struct {
		name string
		// remembered: the replica committed to the session before, so the
		// round is planned from its memory, without a read (known.go).
		remembered bool
		txns       int64 // txns of the refused append
	}{
		{"session remembered", true, 2},  // the write, the read after it
		{"session read first", false, 3}, // a read, the write, the read after it
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
			sid := newSession(t, s, "n1").Session.Id
			ctx := ctxT(t)
			var last int64
			if tc.remembered {
				if _, err := s.Append(ctx, sid, []*castv1.Message{userMsg("before")}, sent); err != nil {
					t.Fatal(err)
				}
				last = 1
			}
			var archived atomic.Bool
			store.SetBeforeTxn(s, func() {
				if archived.CompareAndSwap(false, true) {
					if err := archiveSession(context.Background(), s, sid); err != nil {
						t.Error(err)
					}
				}
			})
			txns, conflicts := store.AppendTxns(s), store.AppendConflicts(s)
			_, err := s.Append(ctx, sid, []*castv1.Message{userMsg("raced the archive")}, sent)
			wantArchived(t, "append archived between its plan and its txn", err)
			if !archived.Load() {
				t.Fatal("the round never reached its txn")
			}
			if got := store.AppendTxns(s) - txns; got != tc.txns {
				t.Errorf("the refused append sent %d txns; want %d", got, tc.txns)
			}
			if got := store.AppendConflicts(s) - conflicts; got > 1 {
				t.Errorf("the refused append was charged %v tries; want at most one", got)
			}
			txns = store.AppendTxns(s)
			_, err = s.Append(ctx, sid, []*castv1.Message{userMsg("after the archive")}, sent)
			wantArchived(t, "append after the archive", err)
			if got := store.AppendTxns(s) - txns; got != 1 {
				t.Errorf("an append to an archived session sent %d txns; want 1 (its read)", got)
			}
			if got, err := s.GetSession(ctx, sid); err != nil || got.LastSeq != last {
				t.Fatalf("the archived session's last seq is %d (%v); want %d", got.GetLastSeq(), err, last)
			}
		})
	}
}

// What an archived session still takes, and what refuses an open-only
// append to it: its owner's writes go in (a turn that started before the
// archive ends, its output kept), and so do notices (no Open); a notice the
// replica committed leaves no memory that the session is open, so a send
// after it is still refused; a large message is refused before its chunks
// are written; a session archived before archives moved the seq key (its
// record says so, nothing else does) is refused all the same.
func TestArchivedSessionRefusesOpenAppends(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	s := testharness.OpenStore(t, ep, nil)
	cli := etcdClient(t, ep)
	ctx := ctxT(t)

	c := newSession(t, s, "n1")
	sid := c.Session.Id
	if _, err := s.Append(ctx, sid, []*castv1.Message{userMsg("before")}, sent); err != nil {
		t.Fatal(err)
	}
	if err := archiveSession(ctx, s, sid); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name string
		g    fence.Guard
	}{
		{"the owner's output", fence.Guard{Node: "n1", Token: c.Token, Open: true}},
		{"a notice", fence.Guard{}},
	} {
		out, err := s.Append(ctx, sid, []*castv1.Message{{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE,
			Text: tc.name}}, tc.g)
		if err != nil || out[0].Seq != int64(i+2) {
			t.Fatalf("%s in an archived session: %v, %v; want it stored at seq %d", tc.name, out, err, i+2)
		}
	}
	_, err := s.Append(ctx, sid, []*castv1.Message{userMsg("after a notice")}, sent)
	wantArchived(t, "a send after a notice to an archived session", err)

	chunks := chunkKeys(t, cli)
	_, err = s.Append(ctx, sid, []*castv1.Message{toolResult(ids.NewClientID(), bigText(600<<10))}, sent)
	wantArchived(t, "a large message to an archived session", err)
	if got := chunkKeys(t, cli); got != chunks {
		t.Errorf("%d chunk keys after the refused large message; want %d (none written)", got, chunks)
	}

	old := newSession(t, s, "n1").Session
	old.Archived = true
	old.Node, old.LastSeq = "", 0 // live fields: never in the record
	rec, err := proto.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, s, "sessions/"+old.Id, string(rec)); err != nil {
		t.Fatal(err)
	}
	_, err = s.Append(ctx, old.Id, []*castv1.Message{userMsg("to a session archived long ago")}, sent)
	wantArchived(t, "append to a session archived before archives moved the seq key", err)
	if got := readAll(t, s, sid); len(got) != 3 {
		t.Fatalf("the archived session holds %d messages; want 3 (a send before the archive, the owner's, the notice)", len(got))
	}
}

// A send retried with its client id after the session was archived gets
// the message it stored back (AIP-155: a retry answers as the first call
// did), not SESSION_ARCHIVED: a client whose answer was lost would be told
// the message was refused although the session holds it. A new message is
// still refused. Inline and chunked messages take different paths.
func TestRetriedSendAfterArchiveGetsItsMessage(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), smallChunks)
	ctx := ctxT(t)
	for name, size := range map[string]int{"inline": 5, "chunked": 4096} { // smallChunks: 1 KiB chunks
		text := strings.Repeat("x", size)
		t.Run(name, func(t *testing.T) {
			sid := newSession(t, s, "n1").Session.Id
			m := userMsg(text)
			first, err := s.Append(ctx, sid, []*castv1.Message{proto.Clone(m).(*castv1.Message)}, sent)
			if err != nil {
				t.Fatal(err)
			}
			if err := archiveSession(ctx, s, sid); err != nil {
				t.Fatal(err)
			}
			again, err := s.Append(ctx, sid, []*castv1.Message{proto.Clone(m).(*castv1.Message)}, sent)
			if err != nil {
				t.Fatalf("retry of a stored send after the archive: %v; want message %d back", err, first[0].Seq)
			}
			if again[0].Seq != first[0].Seq || !again[0].CreateTime.AsTime().Equal(first[0].CreateTime.AsTime()) {
				t.Fatalf("retry answered seq %d at %v, want %d at %v", again[0].Seq, again[0].CreateTime.AsTime(), first[0].Seq, first[0].CreateTime.AsTime())
			}
			_, err = s.Append(ctx, sid, []*castv1.Message{userMsg(text)}, sent)
			wantArchived(t, "a new message to the archived session", err)
		})
	}
}

// A permission request shows its tool's input, clipped, as the session's
// state reason. Clipped by bytes, an input of non-ASCII text (an edit of a
// French README, a command with a path in Japanese) was cut inside a
// character: the session record could not be encoded, so the request
// failed and the tool call could never be approved.
func TestPermissionForNonASCIIInputIsAsked(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	sid := newSession(t, s, "n1").Session.Id
	ctx := ctxT(t)
	for i, input := range []string{"x" + strings.Repeat("é", 300), "xx" + strings.Repeat("日本語", 100), "plain"} {
		rid := "perm-" + string(rune('a'+i))
		asked, err := s.AskPermission(ctx, sid, store.Permission{RequestID: rid, Tool: "Edit", Input: input})
		if err != nil {
			t.Fatalf("ask for an input of %d bytes: %v", len(input), err)
		}
		sess, err := s.GetSession(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if asked.GetState() != sess.State || asked.GetStateReason() != sess.StateReason {
			t.Fatalf("the ask returned the session %v (%q), stored %v (%q); want the wait as stored", asked.GetState(), asked.GetStateReason(), sess.State, sess.StateReason)
		}
		if sess.State != castv1.SessionState_SESSION_STATE_WAITING_PERMISSION || !utf8.ValidString(sess.StateReason) {
			t.Fatalf("session is %v, reason %q; want waiting on a permission, shown in UTF-8", sess.State, sess.StateReason)
		}
	}
}

// A permission request asked again with its id after it was answered (the
// asking side's wait ended as the answer landed) leaves the session
// running: marking it WAITING_PERMISSION showed a prompt no one could
// answer (`cast approve` finds no pending request) until the turn ended.
func TestPermissionAskedAgainAfterItsAnswerKeepsTheSessionRunning(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	sid := newSession(t, s, "n1").Session.Id
	ctx := ctxT(t)
	p := store.Permission{RequestID: "perm-again", Tool: "Bash", Input: `{"command":"ls"}`}
	if _, err := s.AskPermission(ctx, sid, p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AnswerPermission(ctx, sid, p.RequestID, true, ""); err != nil {
		t.Fatal(err)
	}
	before, err := s.GetSession(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if asked, err := s.AskPermission(ctx, sid, p); err != nil || asked != nil {
		t.Fatalf("asked again after its answer: %v, %v; want no wait (nil) and no error", asked, err)
	}
	sess, err := s.GetSession(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if sess.State != before.State || sess.StateReason != before.StateReason {
		t.Fatalf("asked again after its answer: session %v (%q), was %v (%q)", sess.State, sess.StateReason, before.State, before.StateReason)
	}
	// The id asked for another tool run would be given this one's answer.
	other := p
	other.Input = `{"command":"rm -rf build"}`
	if _, err := s.AskPermission(ctx, sid, other); !errs.HasReason(err, errs.ReasonClientIDReused) {
		t.Fatalf("the id asked again for another tool run: %v, want CLIENT_ID_REUSED", err)
	}
}
