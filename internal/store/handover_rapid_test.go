package store_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"pgregory.net/rapid"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// smNodes are registered once per test; runs disconnect and reconnect them.
var smNodes = []string{"n1", "n2", "n3"}

// smDefaultChecks bounds the rapid runs when neither -rapid.checks nor
// RAPID_CHECKS says otherwise: every action is a few real etcd txns, and
// rapid's default of 100 runs does not fit the test's time budget under
// -race on a small machine. Pass -rapid.checks=N to search harder.
const smDefaultChecks = 50

// TestOwnershipStateMachine drives one session through random sequences of
// migrations (fence, commit, rollback), turns, user and owner appends and
// node disconnects against the real store, and checks after every step that
// the store agrees with a simple model of who owns the session.
func TestOwnershipStateMachine(t *testing.T) {
	limitRapidChecks(t, smDefaultChecks)
	ep := testharness.StartEtcd(t, nil)
	st := testharness.OpenStore(t, ep, nil)
	// A raw client reads the owner index directly: the store's own readers
	// filter stale index entries, which would hide a second owner.
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	pool := &nodePool{st: st, leases: map[string]fence.Lease{}}
	for _, n := range smNodes {
		pool.connect(t, n)
	}
	// seen counts outcomes over all runs, logged at the end, so a run that
	// never reaches (say) a commit to a down node is visible.
	seen := map[string]int{}
	t.Cleanup(func() { t.Logf("outcomes: %v", seen) })
	deadline := time.Now().Add(45 * time.Second) // keeps the whole test < 60 s
	rapid.Check(t, func(rt *rapid.T) {
		if time.Now().After(deadline) {
			// Not a skip: the runs so far were checked; a run past the time
			// budget passes empty, and is counted.
			seen["run past the time budget"]++
			return
		}
		for _, n := range smNodes { // each run starts with every node up
			if pool.leases[n] == 0 {
				pool.connect(rt, n)
			}
		}
		m := newOwnershipModel(rt, st, raw, pool)
		m.seen = seen
		rt.Repeat(m.actions())
	})
}

// limitRapidChecks sets -rapid.checks to n unless the caller chose a value.
func limitRapidChecks(t *testing.T, n int) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if _, env := os.LookupEnv("RAPID_CHECKS"); set || env {
		return
	}
	f := flag.Lookup("rapid.checks")
	old := f.Value.String()
	if err := f.Value.Set(fmt.Sprint(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// nodePool holds each node's lease; 0 means disconnected.
type nodePool struct {
	st     *store.Store
	leases map[string]fence.Lease
}

func (p *nodePool) connect(t interface{ Fatalf(string, ...any) }, n string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := p.st.RegisterNode(ctx, &castv1.Node{Name: n}, "test", time.Minute)
	if err != nil {
		t.Fatalf("register %s: %v", n, err)
	}
	p.leases[n] = l
}

// openMig is the migration whose fence is on the session.
type openMig struct {
	id     string
	ms     *castv1.MigrationSession
	msRev  int64
	target string
}

// ownershipModel is what the store must agree with after every action.
type ownershipModel struct {
	st   *store.Store
	raw  *clientv3.Client
	pool *nodePool
	sid  string
	seen map[string]int

	owner   string
	token   int64
	past    []fence.Guard // every earlier owner guard: all stale now
	running bool          // a turn is in flight
	mig     *openMig      // nil iff the session must not be fenced
	done    []fence.Handover
	acked   []string // client ids of acknowledged appends, in ack order
}

func newOwnershipModel(t *rapid.T, st *store.Store, raw *clientv3.Client, pool *nodePool) *ownershipModel {
	ctx, cancel := opCtx()
	defer cancel()
	c, err := st.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	return &ownershipModel{st: st, raw: raw, pool: pool, sid: c.Session.Id, owner: "n1", token: c.Token}
}

func opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

func (m *ownershipModel) cur() fence.Guard { return fence.Guard{Node: m.owner, Token: m.token} }

// staleGuard draws a guard that must not pass: an earlier owner, the owner
// with a token that is not its key's revision, or another node with the
// current token.
func (m *ownershipModel) staleGuard(t *rapid.T) fence.Guard {
	cands := slices.Clone(m.past)
	cands = append(cands, fence.Guard{Node: m.owner, Token: m.token - 1}, fence.Guard{Node: m.owner, Token: m.token + 1})
	for _, n := range smNodes {
		if n != m.owner {
			cands = append(cands, fence.Guard{Node: n, Token: m.token})
		}
	}
	return rapid.SampledFrom(cands).Draw(t, "stale")
}

// drawGuard draws the current owner's guard or, when stale, a stale one.
func (m *ownershipModel) drawGuard(t *rapid.T, label string) (fence.Guard, bool) {
	if rapid.Bool().Draw(t, label) {
		return m.staleGuard(t), true
	}
	return m.cur(), false
}

func wantReason(t *rapid.T, what string, err error, reasons ...string) {
	t.Helper()
	for _, r := range reasons {
		if errs.HasReason(err, r) {
			return
		}
	}
	t.Fatalf("%s: got %v, want reason %v", what, err, reasons)
}

func (m *ownershipModel) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"fence":      m.fence,
		"startTurn":  m.startTurn,
		"finishTurn": m.finishTurn,
		"userAppend": m.userAppend,
		"ownerAppend": func(t *rapid.T) {
			g, stale := m.drawGuard(t, "staleOwner")
			m.append(t, g, castv1.MessageKind_MESSAGE_KIND_ASSISTANT, 1, stale)
		},
		"commit":     m.commit,
		"rollback":   m.rollback,
		"disconnect": m.disconnect,
		"reconnect": func(t *rapid.T) {
			for _, n := range smNodes {
				if m.pool.leases[n] == 0 {
					m.pool.connect(t, n)
					return
				}
			}
		},
		"": m.check,
	}
}

// fence starts a migration to another node: CreateMigration + FenceSession.
// While fenced it is a second migration, which must be refused.
func (m *ownershipModel) fence(t *rapid.T) {
	others := slices.DeleteFunc(slices.Clone(smNodes), func(n string) bool { return n == m.owner })
	target := rapid.SampledFrom(others).Draw(t, "target")
	src := m.cur()
	staleSrc := rapid.IntRange(0, 4).Draw(t, "staleSource") == 0
	if staleSrc {
		// Only the token is the fence's identity of the owner (the record's
		// source node is informational), so draw a guard with a stale token.
		src = m.staleGuard(t)
		src.Node, src.Token = m.owner, min(src.Token, m.token-1)
	}
	mig := m.createMigration(t, src, target)
	ctx, cancel := opCtx()
	defer cancel()
	rev, msRev, err := m.st.FenceSession(ctx, mig.id, mig.ms, mig.msRev, target)
	switch {
	case m.mig != nil:
		wantReason(t, "second fence", err, errs.ReasonSessionFenced)
		// A state, as a turn start on a fenced session: one code per
		// reason (errs TestEveryReasonHasOneCode).
		if e, _ := errs.As(err); e.Kind != errs.KindFailedPrecondition {
			t.Fatalf("second fence: kind %v, want FAILED_PRECONDITION", e.Kind)
		}
		m.seen["fence: second refused"]++
	case staleSrc:
		wantReason(t, "fence with a stale source token", err, errs.ReasonNotOwner)
		m.seen["fence: stale token refused"]++
	case m.pool.leases[target] == 0:
		wantReason(t, "fence to a disconnected node", err, errs.ReasonNodeNotConn)
		m.seen["fence: down target refused"]++
	case err != nil:
		t.Fatalf("fence to %s: %v", target, err)
	default:
		// A retry (unknown outcome) finds its own fence and the same revisions.
		r2, m2, err := m.st.FenceSession(ctx, mig.id, mig.ms, mig.msRev, target)
		if err != nil || r2 != rev || m2 != msRev {
			t.Fatalf("fence retry: %d %d %v, want %d %d", r2, m2, err, rev, msRev)
		}
		mig.msRev = msRev
		m.mig = mig
		m.seen["fence: ok"]++
	}
}

func (m *ownershipModel) createMigration(t *rapid.T, src fence.Guard, target string) *openMig {
	ctx, cancel := opCtx()
	defer cancel()
	id := "m" + strings.ToLower(ids.NewClientID())
	rec, _, err := m.st.CreateMigration(ctx, &castv1.Migration{
		Id: id, Target: target, TargetNode: target, State: castv1.MigrationState_MIGRATION_STATE_RUNNING,
		Sessions: []*castv1.MigrationSession{{SessionId: m.sid, SourceNode: src.Node, SourceToken: src.Token,
			State: castv1.MigrationState_MIGRATION_STATE_PENDING}},
	}, "")
	if err != nil {
		t.Fatalf("create migration: %v", err)
	}
	return &openMig{id: id, ms: rec.M.Sessions[0], msRev: rec.SessRevs[m.sid], target: target}
}

// startTurn: RUNNING only for the current owner and only while not fenced.
func (m *ownershipModel) startTurn(t *rapid.T) {
	g, stale := m.drawGuard(t, "staleTurn")
	ctx, cancel := opCtx()
	defer cancel()
	_, err := m.st.SetState(ctx, m.sid, g, fence.TurnState{State: castv1.SessionState_SESSION_STATE_RUNNING})
	switch {
	case stale:
		wantReason(t, "turn with a stale token", err, errs.ReasonNotOwner)
	case m.mig != nil:
		wantReason(t, "turn while fenced", err, errs.ReasonSessionFenced)
		m.seen["turn: fenced refused"]++
	case err != nil:
		t.Fatalf("start turn: %v", err)
	default:
		m.running = true
		m.seen["turn: started"]++
	}
}

// finishTurn is not gated by the fence: a drained turn must be able to end.
func (m *ownershipModel) finishTurn(t *rapid.T) {
	g, stale := m.drawGuard(t, "staleFinish")
	ctx, cancel := opCtx()
	defer cancel()
	sess, err := m.st.SetState(ctx, m.sid, g, fence.TurnState{State: castv1.SessionState_SESSION_STATE_IDLE, DeliveredSeq: int64(len(m.acked))})
	switch {
	case stale:
		wantReason(t, "finish with a stale token", err, errs.ReasonNotOwner)
	case err != nil:
		t.Fatalf("finish turn: %v", err)
	case sess.DeliveredSeq != int64(len(m.acked)):
		t.Fatalf("delivered seq %d, want %d", sess.DeliveredSeq, len(m.acked))
	default:
		m.running = false
	}
}

// userAppend takes a zero guard: accepted fenced or not, whoever owns.
func (m *ownershipModel) userAppend(t *rapid.T) {
	m.append(t, fence.Guard{}, castv1.MessageKind_MESSAGE_KIND_USER, rapid.IntRange(1, 3).Draw(t, "n"), false)
}

func (m *ownershipModel) append(t *rapid.T, g fence.Guard, kind castv1.MessageKind, n int, refused bool) {
	msgs := make([]*castv1.Message, n)
	for i := range msgs {
		msgs[i] = &castv1.Message{ClientId: ids.NewClientID(), Kind: kind, Text: "x"}
	}
	ctx, cancel := opCtx()
	defer cancel()
	out, err := m.st.Append(ctx, m.sid, msgs, g)
	if refused {
		wantReason(t, "append with a stale token", err, errs.ReasonNotOwner)
		return
	}
	if err != nil {
		t.Fatalf("append (guard %+v): %v", g, err)
	}
	for i, msg := range out {
		if want := int64(len(m.acked) + 1); msg.Seq != want {
			t.Fatalf("message %d got seq %d, want %d", i, msg.Seq, want)
		}
		m.acked = append(m.acked, msg.ClientId)
	}
}

// commit hands the open migration over; with none open, it retries an
// earlier commit, which must change nothing.
func (m *ownershipModel) commit(t *rapid.T) {
	ctx, cancel := opCtx()
	defer cancel()
	if m.mig == nil {
		if len(m.done) == 0 {
			return
		}
		h := rapid.SampledFrom(m.done).Draw(t, "oldCommit")
		tok, err := m.st.CommitHandover(ctx, h)
		if err != nil || tok != m.token {
			t.Fatalf("late commit retry: %d %v, want the current token %d", tok, err, m.token)
		}
		m.seen["commit: late retry"]++
		return
	}
	h := fence.Handover{MigID: m.mig.id, MS: m.mig.ms, MSRev: m.mig.msRev, Target: m.mig.target,
		Notice: &castv1.Message{ClientId: "migrated-" + m.mig.id, Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE, Text: "moved"}}
	tok, err := m.st.CommitHandover(ctx, h)
	if m.pool.leases[h.Target] == 0 {
		wantReason(t, "commit to a disconnected node", err, errs.ReasonNodeNotConn)
		e, _ := errs.As(err)
		m.seen["commit: down target refused with "+e.Reason]++
		return
	}
	if err != nil {
		t.Fatalf("commit %s: %v", h.MigID, err)
	}
	if tok <= m.token {
		t.Fatalf("commit token %d not above %d", tok, m.token)
	}
	again, err := m.st.CommitHandover(ctx, h)
	if err != nil || again != tok {
		t.Fatalf("commit retry: %d %v, want %d", again, err, tok)
	}
	m.past = append(m.past, m.cur())
	m.owner, m.token, m.mig, m.running = h.Target, tok, nil, false
	m.acked = append(m.acked, h.Notice.ClientId)
	m.done = append(m.done, h)
	m.seen["commit: ok"]++
}

// rollback lifts the fence; owner and token stay.
func (m *ownershipModel) rollback(t *rapid.T) {
	if m.mig == nil {
		return
	}
	ctx, cancel := opCtx()
	defer cancel()
	out := &castv1.MigrationSession{SessionId: m.sid, SourceNode: m.mig.ms.SourceNode, SourceToken: m.mig.ms.SourceToken,
		State: castv1.MigrationState_MIGRATION_STATE_CANCELLED, Reason: "rapid"}
	if _, err := m.st.Unfence(ctx, m.mig.id, out, m.mig.msRev); err != nil {
		t.Fatalf("unfence: %v", err)
	}
	// A retry after an unknown outcome succeeds and changes nothing.
	if _, err := m.st.Unfence(ctx, m.mig.id, out, m.mig.msRev); err != nil {
		t.Fatalf("unfence retry: %v", err)
	}
	m.mig = nil
	m.seen["rollback: ok"]++
}

// disconnect revokes a node's lease; fencing to it must then be refused.
func (m *ownershipModel) disconnect(t *rapid.T) {
	n := rapid.SampledFrom(smNodes).Draw(t, "down")
	if m.pool.leases[n] == 0 {
		return
	}
	ctx, cancel := opCtx()
	defer cancel()
	if err := m.st.UnregisterNode(ctx, m.pool.leases[n]); err != nil {
		t.Fatalf("unregister %s: %v", n, err)
	}
	m.pool.leases[n] = 0
	if m.mig == nil && n != m.owner {
		mig := m.createMigration(t, m.cur(), n)
		_, _, err := m.st.FenceSession(ctx, mig.id, mig.ms, mig.msRev, n)
		wantReason(t, "fence right after disconnect", err, errs.ReasonNodeNotConn)
		m.seen["disconnect: fence refused"]++
	}
}

// check compares the store with the model.
func (m *ownershipModel) check(t *rapid.T) {
	ctx, cancel := opCtx()
	defer cancel()
	owner, tok, err := m.st.Owner(ctx, m.sid)
	if err != nil || owner != m.owner || tok != m.token {
		t.Fatalf("owner %s token %d (%v), model %s %d", owner, tok, err, m.owner, m.token)
	}
	// Exactly one owner: the index has this session under the owner only.
	idx, err := m.raw.Get(ctx, store.DefaultPrefix+"nodesessions/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var holders []string
	for _, kv := range idx.Kvs {
		if parts := strings.Split(string(kv.Key), "/"); parts[len(parts)-1] == m.sid {
			holders = append(holders, parts[len(parts)-2])
		}
	}
	if len(holders) != 1 || holders[0] != m.owner {
		t.Fatalf("owner index holders %v, want [%s]", holders, m.owner)
	}
	want := ""
	if m.mig != nil {
		want = m.mig.id
	}
	if sess, err := m.st.GetSession(ctx, m.sid); err != nil || sess.FencedBy != want {
		t.Fatalf("fence %q (%v), want %q", sess.GetFencedBy(), err, want)
	}
	msgs, next, err := m.st.ListMessages(ctx, m.sid, 1, 0, 1000, "")
	if err != nil || next != "" {
		t.Fatalf("list: %v (next %q)", err, next)
	}
	got := make([]string, len(msgs))
	for i, msg := range msgs {
		if msg.Seq != int64(i+1) {
			t.Fatalf("transcript seq %d at index %d: not dense", msg.Seq, i)
		}
		got[i] = msg.ClientId
	}
	if !slices.Equal(got, m.acked) {
		t.Fatalf("transcript %v, acknowledged %v", got, m.acked)
	}
	sess, err := m.st.GetSession(ctx, m.sid)
	if err != nil {
		t.Fatal(err)
	}
	if running := sess.State == castv1.SessionState_SESSION_STATE_RUNNING; running != m.running {
		t.Fatalf("session state %v, model running=%v", sess.State, m.running)
	}
	if sess.LastSeq != int64(len(m.acked)) {
		t.Fatalf("last seq %d, want %d", sess.LastSeq, len(m.acked))
	}
}
