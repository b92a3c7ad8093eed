package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/objstore/s3test"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

func TestMain(m *testing.M) {
	s3test.RunIfAsked() // the S3 server processes of the tiering tests are this binary
	runMoverIfAsked()   // and so are the processes that move history and are killed
	goleak.VerifyTestMain(m, testharness.LeakOptions()...)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newSession registers a connected node and creates a session on it.
func newSession(t *testing.T, s *store.Store, node string) fence.Created {
	t.Helper()
	ctx := ctxT(t)
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: node}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: node})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func userMsg(text string) *castv1.Message {
	return &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: text}
}

func TestConcurrentAppendsAreDenseAndExported(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	const writers, each = 8, 150
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{userMsg(fmt.Sprintf("w%d-%d", w, i))}, fence.Guard{}); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	var pages []int
	seen := map[string]bool{}
	next := int64(1)
	err := s.Export(ctx, c.Session.Id, func(sess *castv1.Session, msgs []*castv1.Message) error {
		if len(pages) == 0 && (sess == nil || sess.LastSeq != writers*each) {
			return fmt.Errorf("first page session = %v", sess)
		}
		pages = append(pages, len(msgs))
		for _, m := range msgs {
			if m.Seq != next {
				return fmt.Errorf("seq %d, want %d", m.Seq, next)
			}
			next++
			seen[m.Text] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pages) != "[500 500 200]" || len(seen) != writers*each {
		t.Fatalf("pages %v, distinct %d", pages, len(seen))
	}
	// Paged range read: 87..106 in pages of 7.
	var got []int64
	tok := ""
	for {
		msgs, nt, err := s.ListMessages(ctx, c.Session.Id, 87, 106, 7, tok)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			got = append(got, m.Seq)
		}
		if tok = nt; tok == "" {
			break
		}
	}
	if len(got) != 20 || got[0] != 87 || got[19] != 106 {
		t.Fatalf("range read got %v", got)
	}
}

func TestAppendIsIdempotentOnClientID(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	m := userMsg("once")
	first, err := s.Append(ctx, c.Session.Id, []*castv1.Message{m}, fence.Guard{})
	if err != nil {
		t.Fatal(err)
	}
	seq := first[0].Seq
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{userMsg("other")}, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	retry := &castv1.Message{ClientId: m.ClientId, Kind: m.Kind, Text: "once"}
	again, err := s.Append(ctx, c.Session.Id, []*castv1.Message{retry, retry}, fence.Guard{})
	if err != nil {
		t.Fatal(err)
	}
	if again[0].Seq != seq {
		t.Fatalf("retry got seq %d, want %d", again[0].Seq, seq)
	}
	sess, _ := s.GetSession(ctx, c.Session.Id)
	if sess.LastSeq != 2 {
		t.Fatalf("last seq %d, want 2", sess.LastSeq)
	}
}

func TestLargeToolOutputIsChunkedAndExact(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	var b strings.Builder
	for i := 0; b.Len() < 3<<20; i++ {
		fmt.Fprintf(&b, "line %d: ünïcödé ✓ \t%x\n", i, i*7919)
	}
	out := b.String()
	code := int32(3)
	m := &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT,
		ToolResult: &castv1.ToolResult{CallId: "c1", Output: out, IsError: true, HasExitCode: true, ExitCode: code}}
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{m}, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	msgs, _, err := s.ListMessages(ctx, c.Session.Id, 1, 1, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].ToolResult.GetOutput() != out || msgs[0].ToolResult.ExitCode != 3 {
		t.Fatalf("chunked message did not read back exactly (len %d)", len(msgs[0].ToolResult.GetOutput()))
	}
	huge := &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: strings.Repeat("x", store.DefaultMaxMessageBytes+1)}
	_, err = s.Append(ctx, c.Session.Id, []*castv1.Message{huge}, fence.Guard{})
	if !errs.HasReason(err, errs.ReasonMessageTooLarge) {
		t.Fatalf("oversize append: %v", err)
	}
}

func TestStaleOwnerTokenIsRefused(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n2"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	asst := func() *castv1.Message {
		return &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "hi"}
	}
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{asst()}, fence.Guard{Node: "n1", Token: c.Token}); err != nil {
		t.Fatalf("owner append: %v", err)
	}
	tests := []struct {
		name  string
		guard fence.Guard
	}{
		{"wrong node", fence.Guard{Node: "n2", Token: c.Token}},
		{"old token", fence.Guard{Node: "n1", Token: c.Token - 1}},
	}
	for _, tc := range tests {
		if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{asst()}, tc.guard); !errs.HasReason(err, errs.ReasonNotOwner) {
			t.Errorf("%s: got %v, want NOT_OWNER", tc.name, err)
		}
	}
	newTok := handover(t, s, c.Session.Id, "n1", c.Token, "n2")
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{asst()}, fence.Guard{Node: "n1", Token: c.Token}); !errs.HasReason(err, errs.ReasonNotOwner) {
		t.Fatalf("old owner after reassign: %v", err)
	}
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{asst()}, fence.Guard{Node: "n2", Token: newTok}); err != nil {
		t.Fatalf("new owner: %v", err)
	}
	// User messages never depend on the owner.
	if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{userMsg("still accepted")}, fence.Guard{}); err != nil {
		t.Fatal(err)
	}
	owned, err := s.SessionsOwnedBy(ctx, "n2")
	if err != nil || len(owned) != 1 || owned[0].Token != newTok {
		t.Fatalf("owned by n2: %v %v", owned, err)
	}
}

func TestNodeLeaseLapseMarksNodeDown(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	down := make(chan string, 4)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.WatchNodesDown(wctx, func(n string, _ int64) { down <- n })
	l, err := s.RegisterNode(ctx, &castv1.Node{Name: "sleepy", Labels: []string{"laptop"}}, "test", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.NodeSeen(ctx, "sleepy", l, "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.Heartbeat(ctx, l); err != nil {
		t.Fatal(err)
	}
	nodes, _ := s.ListNodes(ctx)
	if len(nodes) != 1 || !nodes[0].Connected {
		t.Fatalf("nodes after register: %v", nodes)
	}
	select { // no more heartbeats: etcd expires the lease
	case n := <-down:
		if n != "sleepy" {
			t.Fatalf("down %q", n)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("node not marked down after its lease lapsed")
	}
	nodes, _ = s.ListNodes(ctx)
	if len(nodes) != 1 || nodes[0].Connected {
		t.Fatalf("nodes after lapse: %v", nodes)
	}
	if err := s.Heartbeat(ctx, l); err != store.ErrLeaseExpired {
		t.Fatalf("heartbeat on lapsed lease: %v", err)
	}
	if err := s.NodeSeen(ctx, "sleepy", l, "test", time.Now()); err != store.ErrLeaseExpired {
		t.Fatalf("last seen on lapsed lease: %v", err)
	}
}

func TestQuotaRefusesBeforeEtcdDoes(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	probe := testharness.OpenStore(t, ep, nil)
	c := newSession(t, probe, "n1")
	ctx := ctxT(t)
	// A store whose quota is 1 MiB above the current size refuses cleanly.
	used, _ := probe.Usage()
	s := testharness.OpenStore(t, ep, func(c *store.Config) { c.QuotaBytes = used + 1<<20; c.QuotaReserve = 0 })
	var refused error
	kept := 0
	for i := 0; i < 200 && refused == nil; i++ {
		m := userMsg(strings.Repeat("q", 100<<10))
		if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{m}, fence.Guard{}); err != nil {
			refused = err
			break
		}
		kept++
	}
	if kept < 5 || !errs.HasReason(refused, errs.ReasonStoreQuota) {
		t.Fatalf("after %d appends: %v, want STORE_QUOTA_EXCEEDED", kept, refused)
	}
	sess, err := probe.GetSession(ctx, c.Session.Id)
	if err != nil || sess.LastSeq != int64(kept) {
		t.Fatalf("acknowledged %d, stored %v (%v)", kept, sess, err)
	}
}

func TestWatchReplaysThenFollows(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	for i := range 5 {
		if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{userMsg(fmt.Sprint("before ", i))}, fence.Guard{}); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan int64, 100)
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(wctx, c.Session.Id, 2, func(ev store.Event) error {
			if ev.Message != nil {
				got <- ev.Message.Seq
			}
			return nil
		})
	}()
	for i := range 10 {
		if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{userMsg(fmt.Sprint("after ", i))}, fence.Guard{}); err != nil {
			t.Fatal(err)
		}
	}
	for want := int64(2); want <= 15; want++ {
		select {
		case seq := <-got:
			if seq != want {
				t.Fatalf("watch got seq %d, want %d", seq, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("watch stalled before seq %d", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRestartKeepsAcknowledgedMessages(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t)
	var id string
	run := func(fn func(s *store.Store)) {
		t.Run("phase", func(t *testing.T) {
			s := testharness.OpenStore(t, testharness.StartEtcd(t, func(c *testharness.EtcdConfig) { c.Dir = dir }), nil)
			fn(s)
		})
	}
	run(func(s *store.Store) {
		c := newSession(t, s, "n1")
		id = c.Session.Id
		for i := range 20 {
			if _, err := s.Append(ctx, id, []*castv1.Message{userMsg(fmt.Sprint(i))}, fence.Guard{}); err != nil {
				t.Fatal(err)
			}
		}
	})
	run(func(s *store.Store) {
		msgs, _, err := s.ListMessages(ctx, id, 1, 0, 100, "")
		if err != nil || len(msgs) != 20 || msgs[19].Text != "19" {
			t.Fatalf("after restart: %d messages, %v", len(msgs), err)
		}
	})
}

func TestBadInput(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	if _, err := s.GetSession(ctx, "zzzzzzz"); !errs.HasReason(err, errs.ReasonNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	if _, err := s.Append(ctx, "zzzzzzz", []*castv1.Message{userMsg("x")}, fence.Guard{}); !errs.HasReason(err, errs.ReasonNotFound) {
		t.Errorf("append to unknown session: %v", err)
	}
	if _, _, err := s.ListMessages(ctx, "zzzzzzz", 1, 0, 10, "garbage"); !errs.HasReason(err, errs.ReasonBadPageToken) {
		t.Errorf("bad page token: %v", err)
	}
	if _, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Node: "ghost"}); !errs.HasReason(err, errs.ReasonNodeNotConn) {
		t.Errorf("create on a node that is not connected: %v", err)
	}
}

// handover moves a session from one node to another the way a migration
// does (fence, then commit) and returns the new owner's token.
func handover(t *testing.T, s *store.Store, sid, from string, token int64, to string) int64 {
	t.Helper()
	ctx := ctxT(t)
	ms := &castv1.MigrationSession{SessionId: sid, SourceNode: from, SourceToken: token, State: castv1.MigrationState_MIGRATION_STATE_PENDING}
	rec, _, err := s.CreateMigration(ctx, &castv1.Migration{Id: "m" + strings.ToLower(ids.NewClientID()), TargetNode: to, Sessions: []*castv1.MigrationSession{ms}}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, msRev, err := s.FenceSession(ctx, rec.M.Id, rec.M.Sessions[0], rec.SessRevs[sid], to)
	if err != nil {
		t.Fatal(err)
	}
	newTok, err := s.CommitHandover(ctx, fence.Handover{MigID: rec.M.Id, MS: rec.M.Sessions[0], MSRev: msRev, Target: to,
		Notice: &castv1.Message{ClientId: "moved-" + rec.M.Id, Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE, NoticeType: "migration", Text: "moved"}})
	if err != nil {
		t.Fatal(err)
	}
	return newTok
}

// Owned sessions are read in pages of one txn each: every session a node
// owns comes back once with its token, across page boundaries, and a
// session that moved away is left out.
func TestEachOwnedSessionPages(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	want := map[string]int64{}
	for range 70 { // more than two pages
		c := newSession(t, s, "n1")
		want[c.Session.Id] = c.Token
	}
	moved := newSession(t, s, "n1")
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n2"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	handover(t, s, moved.Session.Id, "n1", moved.Token, "n2")
	got := map[string]int64{}
	pages := 0
	err := s.EachOwnedSession(ctx, "n1", func(page []fence.OwnedSession) error {
		pages++
		for _, o := range page {
			if _, dup := got[o.Session.Id]; dup || o.Session.Node != "n1" {
				t.Errorf("session %s listed twice or not on n1 (%s)", o.Session.Id, o.Session.Node)
			}
			got[o.Session.Id] = o.Token
		}
		return nil
	})
	if err != nil || pages < 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("owned by n1 in %d pages: %d sessions, want %d (%v)", pages, len(got), len(want), err)
	}
}
