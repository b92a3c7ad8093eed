package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fanout"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// env is a store on an embedded etcd and a hub following it.
type env struct {
	ep  string
	st  *store.Store
	hub *fanout.Hub
}

func newEnv(t testing.TB, cfg fanout.Config, wrap func(fanout.Source) fanout.Source) *env {
	t.Helper()
	ep := testharness.StartEtcd(t, nil)
	return newEnvOn(t, ep, testharness.OpenStore(t, ep, nil), cfg, wrap)
}

// newEnvOn is newEnv over a store of the test's own on etcd at ep.
func newEnvOn(t testing.TB, ep string, st *store.Store, cfg fanout.Config, wrap func(fanout.Source) fanout.Source) *env {
	t.Helper()
	var src fanout.Source = st
	if wrap != nil {
		src = wrap(st)
	}
	h := fanout.New(src, cfg, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &env{ep: ep, st: st, hub: h}
}

// session registers node n1 (once) and creates a session on it.
func (e *env) session(t testing.TB) string {
	t.Helper()
	ctx := ctxT(t)
	if _, err := e.st.RegisterNode(ctx, &castv1.Node{Name: "n1"}, "test", time.Minute); err != nil {
		t.Fatal(err)
	}
	c, err := e.st.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	return c.Session.Id
}

// appendN appends n assistant messages of size bytes to each session, in
// turn, one append each.
func (e *env) appendN(t testing.TB, n, size int, sessions ...string) {
	t.Helper()
	if err := e.appends(ctxT(t), n, size, sessions...); err != nil {
		t.Fatal(err)
	}
}

func (e *env) appends(ctx context.Context, n, size int, sessions ...string) error {
	text := strings.Repeat("x", size)
	for i := range n {
		for _, sid := range sessions {
			m := &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Agent: "claude", Text: fmt.Sprint(i, text)}
			if _, err := e.st.Append(ctx, sid, []*castv1.Message{m}, fence.Guard{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// collector is one Watch that records the seqs it was sent.
type collector struct {
	mu    sync.Mutex
	seqs  []int64
	want  int64         // stop after this seq
	gate  chan struct{} // when set, the first message waits on it (a watcher that does not read)
	err   chan error
	first chan struct{} // closed at the first event (the session): the watch is open
}

func (e *env) watch(ctx context.Context, principal, sid string, startSeq, want int64, gate chan struct{}) *collector {
	c := &collector{want: want, gate: gate, err: make(chan error, 1), first: make(chan struct{})}
	opened := false
	go func() {
		c.err <- e.hub.Watch(ctx, principal, sid, startSeq, func(ev fanout.Event) error {
			if !opened {
				opened = true
				close(c.first)
			}
			if ev.Message == nil {
				return nil
			}
			if c.gate != nil {
				<-c.gate
				c.gate = nil
			}
			c.mu.Lock()
			c.seqs = append(c.seqs, ev.Message.Seq)
			c.mu.Unlock()
			if ev.Message.Seq == c.want {
				return errDone
			}
			return nil
		})
	}()
	return c
}

var errDone = errors.New("got every message")

// check waits for c to get every seq from `from` through want, once each
// and in order.
func (c *collector) check(t *testing.T, ctx context.Context, what string, from int64) {
	t.Helper()
	select {
	case err := <-c.err:
		if !errors.Is(err, errDone) {
			t.Fatalf("%s ended early: %v", what, err)
		}
	case <-ctx.Done():
		t.Fatalf("%s: timed out with %d messages", what, c.count())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if int64(len(c.seqs)) != c.want-from+1 {
		t.Fatalf("%s got %d messages, want %d (seqs %v)", what, len(c.seqs), c.want-from+1, c.seqs)
	}
	for i, s := range c.seqs {
		if s != from+int64(i) {
			t.Fatalf("%s: message %d has seq %d, want %d", what, i, s, from+int64(i))
		}
	}
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seqs)
}

// Many watchers of several sessions, some joining from seq 1 with history
// to replay and some mid-stream, each get every message of their session
// once, in order, while appends go on.
func TestEveryWatcherGetsEveryMessageOnceInOrder(t *testing.T) {
	e := newEnv(t, fanout.DefaultConfig(), nil)
	ctx := ctxT(t)
	const sessions, watchers, n = 3, 20, 60
	var sids []string
	for range sessions {
		sids = append(sids, e.session(t))
	}
	e.appendN(t, 10, 100, sids...) // history the early watchers replay
	type w struct {
		c    *collector
		from int64
	}
	var ws []w
	for i := range watchers {
		for _, sid := range sids {
			ws = append(ws, w{e.watch(ctx, fmt.Sprint("p", i), sid, 1, n, nil), 1})
		}
	}
	for _, x := range ws {
		<-x.c.first
	}
	e.appendN(t, 15, 100, sids...)
	// Join while appends go on: from seq 20, history then live, the seam
	// between them moving under the joins.
	appended := make(chan error, 1)
	go func() { appended <- e.appends(ctx, n-25, 100, sids...) }()
	for i := range watchers / 2 {
		for _, sid := range sids {
			ws = append(ws, w{e.watch(ctx, fmt.Sprint("q", i), sid, 20, n, nil), 20})
		}
	}
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	for i, x := range ws {
		x.c.check(t, ctx, fmt.Sprint("watcher ", i), x.from)
	}
	if st := e.hub.Stats(); st.FellBehind != 0 {
		t.Errorf("%d watchers fell behind with room for every message", st.FellBehind)
	}
}

// A watcher that stops reading falls behind without holding up the
// others: they get everything while it still waits. Once it reads again
// it catches up from the store and gets every message once, in order.
func TestSlowWatcherFallsBehindAloneAndCatchesUp(t *testing.T) {
	cfg := fanout.DefaultConfig()
	cfg.Buffer = 4
	e := newEnv(t, cfg, nil)
	ctx := ctxT(t)
	sid := e.session(t)
	const n = 40
	gate := make(chan struct{})
	slow := e.watch(ctx, "slow", sid, 1, n, gate)
	fast := []*collector{e.watch(ctx, "a", sid, 1, n, nil), e.watch(ctx, "b", sid, 1, n, nil)}
	<-slow.first
	for _, f := range fast {
		<-f.first
	}
	e.appendN(t, n, 100, sid)
	for i, f := range fast {
		f.check(t, ctx, fmt.Sprint("fast watcher ", i), 1)
	}
	if slow.count() != 0 {
		t.Fatalf("the gated watcher recorded %d messages before its gate opened", slow.count())
	}
	if st := e.hub.Stats(); st.FellBehind < 1 {
		t.Fatalf("the watcher that did not read for %d messages with a buffer of %d did not fall behind: %+v", n, cfg.Buffer, st)
	}
	close(gate)
	slow.check(t, ctx, "slow watcher", 1)
}

// breakable is a Source whose feed a test can cut (as etcd cancels a
// watch), hold before it starts again (so the history it asks for can be
// compacted meanwhile), or have refused (as etcd refuses a range its user
// may not read).
type breakable struct {
	fanout.Source
	mu     sync.Mutex
	cut    context.CancelFunc
	hold   chan struct{} // when set, the next Feed waits on it
	held   chan int64    // the revision a held Feed asked for
	refuse error         // when set, Feed fails with it
	starts int
}

func (b *breakable) Feed(ctx context.Context, rev int64, want func(string) bool, fn func(store.FeedBatch)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.mu.Lock()
	b.cut, b.starts = cancel, b.starts+1
	hold, held, refuse := b.hold, b.held, b.refuse
	b.hold = nil
	b.mu.Unlock()
	if refuse != nil {
		return refuse
	}
	if hold != nil {
		held <- rev
		<-hold
	}
	return b.Source.Feed(ctx, rev, want, fn)
}

// setRefuse makes the next feeds fail with err (nil: work again) and
// cuts the running one.
func (b *breakable) setRefuse(err error) {
	b.mu.Lock()
	b.refuse = err
	b.cut()
	b.mu.Unlock()
}

func newBreakableEnv(t *testing.T) (*breakable, *env) {
	var b *breakable
	e := newEnv(t, fanout.DefaultConfig(), func(s fanout.Source) fanout.Source {
		b = &breakable{Source: s}
		return b
	})
	return b, e
}

// breakAndHold cuts the running feed and holds the next one; it returns
// the revision that one asks for and the release.
func (b *breakable) breakAndHold() (int64, func()) {
	hold := make(chan struct{})
	b.mu.Lock()
	b.hold, b.held = hold, make(chan int64, 1)
	b.cut()
	held := b.held
	b.mu.Unlock()
	return <-held, func() { close(hold) }
}

// The feed cut (as etcd cancels a watch), then asked for from a revision
// since compacted (etcd refuses it with ErrCompacted): the hub starts a
// new feed each time and every watcher gets every message once, in order,
// those appended while no feed ran included.
func TestHubSurvivesItsFeedCutAndCompacted(t *testing.T) {
	b, e := newBreakableEnv(t)
	ctx := ctxT(t)
	sids := []string{e.session(t), e.session(t)}
	const n = 30
	var cs []*collector
	for i := range 4 {
		for _, sid := range sids {
			cs = append(cs, e.watch(ctx, fmt.Sprint("p", i), sid, 1, n, nil))
		}
	}
	for _, c := range cs {
		<-c.first
	}
	e.appendN(t, 10, 100, sids...)

	// Cut: the next feed starts from a fresh revision; what came in
	// between reaches the watchers through their catch-up reads.
	_, release := b.breakAndHold()
	e.appendN(t, 5, 100, sids...)
	release()
	e.appendN(t, 5, 100, sids...)

	// Compacted: the next feed asks for a revision etcd no longer has.
	_, release = b.breakAndHold()
	e.appendN(t, 5, 100, sids...)
	compact(t, e.ep)
	release()
	e.appendN(t, n-25, 100, sids...)
	for i, c := range cs {
		c.check(t, ctx, fmt.Sprint("watcher ", i), 1)
	}
	b.mu.Lock()
	starts := b.starts
	b.mu.Unlock()
	if st := e.hub.Stats(); starts < 4 || st.Feeds < 4 {
		t.Errorf("feeds started %d times (hub counted %d); want at least 4: the first, after the cut, the compacted one and after it", starts, st.Feeds)
	}
}

// A principal's watches past the cap are refused before anything is sent;
// another principal's are not, and a closed watch makes room.
func TestWatchCapIsPerPrincipal(t *testing.T) {
	cfg := fanout.DefaultConfig()
	cfg.MaxPerPrincipal = 2
	e := newEnv(t, cfg, nil)
	sid := e.session(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	first, cancelFirst := context.WithCancel(ctx)
	a1 := e.watch(first, "user:alice", sid, 0, 1, nil)
	a2 := e.watch(ctx, "user:alice", sid, 0, 1, nil)
	<-a1.first
	<-a2.first
	sent := false
	err := e.hub.Watch(ctx, "user:alice", sid, 0, func(fanout.Event) error { sent = true; return nil })
	if er, ok := errs.As(err); !ok || er.Kind != errs.KindResourceExhausted || er.Reason != authz.ReasonTooManyStreams || sent {
		t.Fatalf("alice's third watch: %v (sent %v); want RESOURCE_EXHAUSTED %s before any event", err, sent, authz.ReasonTooManyStreams)
	}
	b := e.watch(ctx, "user:bob", sid, 0, 1, nil)
	select {
	case <-b.first:
	case err := <-b.err:
		t.Fatalf("bob's watch: %v", err)
	}
	cancelFirst()
	if err := <-a1.err; err != nil {
		t.Fatalf("alice's first watch ended with %v", err)
	}
	a3 := e.watch(ctx, "user:alice", sid, 0, 1, nil)
	select {
	case <-a3.first:
	case err := <-a3.err:
		t.Fatalf("alice's watch after closing one: %v", err)
	}
}

// A permission wait returns the answer given after it began, and one
// given before.
func TestWaitPermission(t *testing.T) {
	e := newEnv(t, fanout.DefaultConfig(), nil)
	ctx := ctxT(t)
	sid := e.session(t)
	if _, err := e.st.AskPermission(ctx, sid, store.Permission{RequestID: "r1", Tool: "Bash"}); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var p store.Permission
	go func() {
		var err error
		p, err = e.hub.WaitPermission(ctx, sid, "r1")
		got <- err
	}()
	testharness.WaitFor(t, 30*time.Second, "the wait to join the feed", func() bool { return e.hub.Stats().Watchers == 1 })
	e.appendN(t, 3, 10, sid) // messages are not for permission waits
	if _, err := e.st.AnswerPermission(ctx, sid, "r1", true, "go on"); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil || !p.Allow || p.Message != "go on" {
		t.Fatalf("wait: %+v, %v", p, err)
	}
	p, err := e.hub.WaitPermission(ctx, sid, "r1")
	if err != nil || !p.Allow {
		t.Fatalf("wait for an answered request: %+v, %v", p, err)
	}
	if _, err := e.hub.WaitPermission(ctx, sid, "nope"); !errs.HasReason(err, errs.ReasonNotFound) {
		t.Fatalf("wait for an unknown request: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*fanout.Config)
		ok   bool
	}{
		{"defaults", func(*fanout.Config) {}, true},
		{"no buffer", func(c *fanout.Config) { c.Buffer = 0 }, false},
		{"huge buffer", func(c *fanout.Config) { c.Buffer = 1 << 20 }, false},
		{"no watches", func(c *fanout.Config) { c.MaxPerPrincipal = 0 }, false},
	} {
		c := fanout.DefaultConfig()
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// A feed that fails for a reason a new feed does not cure ends every
// watcher with that failure and refuses new ones with it, rather than
// leave them waiting on a feed that does not come; once a feed runs
// again, watches work and miss nothing.
func TestBrokenFeedEndsWatchersWithWhy(t *testing.T) {
	r, e := newBreakableEnv(t)
	ctx := ctxT(t)
	sid := e.session(t)
	w := e.watch(ctx, "p", sid, 1, 100, nil)
	<-w.first
	denied := errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "watch interrupted (etcd refused the watch); watch again with start_seq")
	testharness.WaitFor(t, 30*time.Second, "a running feed to cut", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.cut != nil
	})
	r.setRefuse(denied)
	if err := <-w.err; !errors.Is(err, denied) {
		t.Fatalf("the watcher of a broken feed ended with %v, want %v", err, denied)
	}
	err := e.hub.Watch(ctx, "p", sid, 1, func(fanout.Event) error { return nil })
	if !errors.Is(err, denied) {
		t.Fatalf("a new watch on a broken feed: %v, want %v", err, denied)
	}
	e.appendN(t, 3, 10, sid)
	r.setRefuse(nil)
	const n = 6
	testharness.WaitFor(t, 30*time.Second, "a new feed", func() bool {
		w = e.watch(ctx, "p", sid, 1, n, nil)
		select {
		case <-w.first:
			return true
		case err := <-w.err:
			if !errors.Is(err, denied) {
				t.Fatalf("a watch while the feed comes back: %v", err)
			}
			return false
		}
	})
	e.appendN(t, n-3, 10, sid)
	w.check(t, ctx, "a watch once the feed runs again", 1)
}

// panicky is a Source whose Replay panics.
type panicky struct{ fanout.Source }

func (panicky) Replay(context.Context, string, int64, func(store.Event) error) (int64, int64, error) {
	panic("replay broke")
}

// The catch-up read runs on a goroutine of its own; a panic there is
// raised again on the watch's goroutine, where a gRPC call's recovery
// interceptor sees it, rather than ending the process.
func TestWatchRaisesAReplayPanicOnItsCaller(t *testing.T) {
	e := newEnv(t, fanout.DefaultConfig(), func(src fanout.Source) fanout.Source { return panicky{src} })
	sid := e.session(t)
	got := func() (p any) {
		defer func() { p = recover() }()
		err := e.hub.Watch(ctxT(t), "p", sid, 1, func(fanout.Event) error { return nil })
		t.Errorf("Watch returned (%v) instead of panicking", err)
		return nil
	}()
	if got != "replay broke" {
		t.Fatalf("Watch recovered %v, want the Replay's panic", got)
	}
}

// stuckReplay is a Source whose Replay says it began, then waits for its
// context to end.
type stuckReplay struct {
	fanout.Source
	began chan struct{}
}

func (s stuckReplay) Replay(ctx context.Context, _ string, _ int64, _ func(store.Event) error) (int64, int64, error) {
	close(s.began)
	<-ctx.Done()
	return 0, 0, ctx.Err()
}

// When Run returns (the replica stops) every Watch ends with ErrStopped:
// one following the feed, one in the middle of its catch-up read (which
// the stop cuts short), and one begun after, at once. Watches hold no
// context of their own for this.
func TestWatchesEndWithErrStoppedWhenRunReturns(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	st := testharness.OpenStore(t, ep, nil)
	e := &env{ep: ep, st: st, hub: fanout.New(st, fanout.DefaultConfig(), zaptest.NewLogger(t))}
	sid := e.session(t)
	stuck := stuckReplay{Source: st, began: make(chan struct{})}
	reading := fanout.New(stuck, fanout.DefaultConfig(), zaptest.NewLogger(t))
	ctx := ctxT(t)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{}, 2)
	for _, h := range []*fanout.Hub{e.hub, reading} {
		go func() { h.Run(runCtx); ran <- struct{}{} }()
	}
	following := e.watch(ctx, "p", sid, 1, 100, nil)
	<-following.first
	inRead := make(chan error, 1)
	go func() { inRead <- reading.Watch(ctx, "p", sid, 1, func(fanout.Event) error { return nil }) }()
	<-stuck.began
	stop()
	<-ran
	<-ran
	for what, err := range map[string]error{"the following watch": <-following.err, "the watch in its catch-up read": <-inRead,
		"a watch after the stop": e.hub.Watch(ctx, "p", sid, 1, func(fanout.Event) error { return nil })} {
		if !errors.Is(err, fanout.ErrStopped) {
			t.Errorf("%s ended with %v, want ErrStopped", what, err)
		}
	}
	if n := e.hub.Stats().Watchers + reading.Stats().Watchers; n != 0 {
		t.Errorf("%d watchers still registered", n)
	}
}

// A catch-up read ends with its watch's context (the stream closed), though
// the read's context is no child of it.
func TestCatchUpReadEndsWithItsWatch(t *testing.T) {
	e := newEnv(t, fanout.DefaultConfig(), nil)
	sid := e.session(t)
	stuck := stuckReplay{Source: e.st, began: make(chan struct{})}
	h := fanout.New(stuck, fanout.DefaultConfig(), zaptest.NewLogger(t))
	ctx, closeStream := context.WithCancel(ctxT(t))
	ended := make(chan error, 1)
	go func() { ended <- h.Watch(ctx, "p", sid, 1, func(fanout.Event) error { return nil }) }()
	<-stuck.began
	closeStream()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("a watch closed in its catch-up read ended with %v, want nil", err)
		}
	case <-ctxT(t).Done():
		t.Fatal("the catch-up read outlived its watch")
	}
}
