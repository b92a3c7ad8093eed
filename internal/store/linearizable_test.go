package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// Bounds of the recorded history: it has to stay small enough for the
// checker (and the whole test under -race on two cores) to finish quickly.
const (
	linClients      = 4
	linOpsPerClient = 40
	linMigrations   = 6
	linWorkload     = 25 * time.Second // the workload stops here whatever is left
	linCheckTimeout = 20 * time.Second
	linMigratorID   = linClients     // porcupine client lane of the migrator
	linFinalID      = linClients + 1 // lane of the final read
)

// linRecorder collects the history. An op with an unknown outcome may take
// effect any time after its call: its return time is the end of the
// history, unless closeAt bounds it (see linClientOp).
type linRecorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func (r *linRecorder) now() int64 { return time.Since(r.start).Nanoseconds() }

// add records an op returning now and returns its index.
func (r *linRecorder) add(client int, in linIn, out linOut, call int64) int {
	ret := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if out.Unknown {
		ret = -1 // the end of the history, unless closeAt bounds it
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	return len(r.ops) - 1
}

// closeAt bounds the window of the unknown-outcome op i at ret.
func (r *linRecorder) closeAt(i int, ret int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops[i].Return = ret
}

func (r *linRecorder) history() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := r.now() + 1
	out := slices.Clone(r.ops)
	for i := range out {
		if out[i].Return < 0 {
			out[i].Return = end
		}
	}
	return out
}

// TestLinearizableUnderFaults records concurrent user appends, owner and
// transcript reads and migrations of one session while some ops time out
// and etcd is stopped and restarted mid-run (each failed append is retried
// once with its client id), and checks the history is linearizable against
// linModel.
func TestLinearizableUnderFaults(t *testing.T) {
	etcd := testharness.StartRestartableEtcd(t)
	st := testharness.OpenStore(t, etcd.ClientURL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), linWorkload)
	defer cancel()
	for _, n := range smNodes { // leases outlive the test's run
		if _, err := st.RegisterNode(ctx, &castv1.Node{Name: n}, "test", 2*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	c, err := st.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	sid := c.Session.Id
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rec := &linRecorder{start: time.Now()}

	var done atomic.Int64    // finished client ops: the restart waits for some
	var unknown atomic.Int64 // appends with an unknown outcome
	var wg sync.WaitGroup
	for cl := range linClients {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(seed, uint64(cl)))
			for range linOpsPerClient {
				if ctx.Err() != nil {
					return
				}
				if err := linClientOp(ctx, st, sid, rec, cl, rnd, &unknown); err != nil {
					t.Error(err)
					return
				}
				done.Add(1)
				time.Sleep(time.Duration(rnd.IntN(15)) * time.Millisecond)
			}
		})
	}
	migErr := make(chan error, 1)
	wg.Go(func() { migErr <- linMigrator(ctx, st, sid, rec, rand.New(rand.NewPCG(seed, 99))) })
	restarted := make(chan error, 1)
	wg.Go(func() {
		// Crash etcd once the run is well under way, on the same data dir.
		for done.Load() < linClients*linOpsPerClient/3 && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		from := rec.now()
		err := etcd.Restart(300 * time.Millisecond)
		t.Logf("etcd restarted after %d client ops, down %v", done.Load(), time.Duration(rec.now()-from).Round(time.Millisecond))
		restarted <- err
	})
	wg.Wait()
	if t.Failed() {
		return
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	if err := <-migErr; err != nil {
		t.Fatal(err)
	}

	call := rec.now()
	final, err := listAll(context.Background(), st, sid, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rec.add(linFinalID, linIn{Kind: linList}, linOut{CIDs: final}, call)

	ops := rec.history()
	moves := 0
	for _, op := range ops {
		if op.Output.(linOut).Moved {
			moves++
		}
	}
	t.Logf("history: %d ops, %d appends with unknown outcome, %d messages, %d migrations committed", len(ops), unknown.Load(), len(final), moves)
	checkLinearizable(t, linModel("n1", c.Token), ops, porcupine.Ok)

	// The same history with one result corrupted must be rejected, so the
	// check above can fail. The corrupted op is the first to return with a
	// known outcome, which keeps the (exhaustive) search for an Illegal
	// verdict short; corrupting the final read is caught too, but in up to
	// seconds under -race, too close to the timeout to be a stable test.
	checkLinearizable(t, linModel("n1", c.Token), corruptFirst(ops), porcupine.Illegal)
}

// corruptFirst returns ops with the first known result (by return time)
// changed into one no order of the ops can explain.
func corruptFirst(ops []porcupine.Operation) []porcupine.Operation {
	bad := slices.Clone(ops)
	first := -1
	for i, op := range bad {
		if !op.Output.(linOut).Unknown && (first < 0 || op.Return < bad[first].Return) {
			first = i
		}
	}
	out := bad[first].Output.(linOut)
	switch bad[first].Input.(linIn).Kind {
	case linAppend:
		out.Seq += 1000
	case linOwner:
		out.Token++
	case linList:
		out.CIDs = append(slices.Clone(out.CIDs), "not-a-message")
	case linMigrate:
		out.Moved, out.Token = true, 0
	}
	bad[first].Output = out
	return bad
}

// linClientOp runs one random op with a short context and records it.
//
// An append that fails (timed out, cut by the restart) has an unknown
// outcome and is retried once at once, with the same client id and a long
// context that outlasts the restart: being idempotent, the retry must
// return one seq, whether or not the first try landed, and the model holds
// that seq to the transcript. The retry's return also closes the first
// try's window: after it, the client id's key exists, so a late commit of
// the first try fails its compare and can change nothing. (Leaving every
// such window open to the end of the history is also sound, but the
// checker then weighs where each one lands among all later ops, and on
// some runs does not finish within its timeout.)
func linClientOp(ctx context.Context, st *store.Store, sid string, rec *linRecorder, cl int, rnd *rand.Rand, unknown *atomic.Int64) error {
	// Mostly roomy deadlines; some so short the op is cut mid-flight.
	timeout := time.Second
	switch rnd.IntN(10) {
	case 0:
		timeout = 2 * time.Millisecond
	case 1:
		timeout = 15 * time.Millisecond
	}
	octx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	call := rec.now()
	switch p := rnd.IntN(10); {
	case p < 6:
		cid := ids.NewClientID()
		in := linIn{Kind: linAppend, CID: cid}
		seq, err := appendOne(octx, st, sid, cid)
		if err == nil {
			rec.add(cl, in, linOut{Seq: seq}, call)
			return nil
		}
		unknown.Add(1)
		first := rec.add(cl, in, linOut{Unknown: true}, call)
		call = rec.now()
		rctx, rcancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer rcancel()
		if seq, err = appendOne(rctx, st, sid, cid); err != nil {
			return fmt.Errorf("retry of append %s after %v: %w", cid, timeout, err)
		}
		rec.add(cl, in, linOut{Seq: seq}, call)
		rec.closeAt(first, rec.now())
	case p < 8:
		// A failed read constrains nothing; it is left out of the history.
		if node, tok, err := st.Owner(octx, sid); err == nil {
			rec.add(cl, linIn{Kind: linOwner}, linOut{Node: node, Token: tok}, call)
		}
	default:
		if cids, err := listAll(octx, st, sid, timeout); err == nil {
			rec.add(cl, linIn{Kind: linList}, linOut{CIDs: cids}, call)
		}
	}
	return nil
}

func appendOne(ctx context.Context, st *store.Store, sid, cid string) (int64, error) {
	out, err := st.Append(ctx, sid, []*castv1.Message{{ClientId: cid, Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "x"}}, fence.Guard{})
	if err != nil {
		return 0, err
	}
	return out[0].Seq, nil
}

// listAll reads the whole transcript (one snapshot, paged) as client ids.
func listAll(ctx context.Context, st *store.Store, sid string, timeout time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var cids []string
	tok := ""
	for range 10 {
		msgs, next, err := st.ListMessages(ctx, sid, 1, 0, 1000, tok)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			cids = append(cids, m.ClientId)
		}
		if tok = next; tok == "" {
			return cids, nil
		}
	}
	return nil, errs.New(errs.KindInternal, errs.ReasonInternal, "transcript did not end after 10 pages")
}

// linMigrator moves the session to another node now and then. Each
// migration is one op, from before the fence to the commit's final answer;
// every step is retried through timeouts and the restart (all three are
// idempotent), so the op ends with a known outcome or the test fails.
func linMigrator(ctx context.Context, st *store.Store, sid string, rec *linRecorder, rnd *rand.Rand) error {
	for range linMigrations {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(150+rnd.IntN(250)) * time.Millisecond):
		}
		call := rec.now()
		var owner string
		var tok int64
		if err := retryStore(ctx, nil, func(c context.Context) (err error) { owner, tok, err = st.Owner(c, sid); return err }); err != nil {
			return err
		}
		others := slices.DeleteFunc(slices.Clone(smNodes), func(n string) bool { return n == owner })
		target := others[rnd.IntN(len(others))]
		id := "m" + strings.ToLower(ids.NewClientID())
		in := linIn{Kind: linMigrate, Target: target, NoticeCID: "migrated-" + id}
		var mr *fence.MigrationRecord
		err := retryStore(ctx, nil, func(c context.Context) (err error) {
			mr, _, err = st.CreateMigration(c, &castv1.Migration{Id: id, RequestId: id, TargetNode: target,
				State: castv1.MigrationState_MIGRATION_STATE_RUNNING, Sessions: []*castv1.MigrationSession{{
					SessionId: sid, SourceNode: owner, SourceToken: tok, State: castv1.MigrationState_MIGRATION_STATE_PENDING}}}, fence.RequestKey("admin:lin", id))
			return err
		})
		if err != nil {
			return err
		}
		ms, msRev := mr.M.Sessions[0], mr.SessRevs[sid]
		err = retryStore(ctx, nil, func(c context.Context) (err error) {
			_, msRev, err = st.FenceSession(c, id, ms, mr.SessRevs[sid], target)
			return err
		})
		if _, ok := errs.As(err); ok { // refused: nothing moved
			rec.add(linMigratorID, in, linOut{}, call)
			continue
		} else if err != nil {
			return err
		}
		// Concurrent appends move the seq counter under the commit, which
		// then reports CONFLICT: worth retrying, like a timeout.
		conflict := func(err error) bool { return errs.HasReason(err, errs.ReasonConflict) }
		var newTok int64
		h := fence.Handover{MigID: id, MS: ms, MSRev: msRev, Target: target,
			Notice: &castv1.Message{ClientId: in.NoticeCID, Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE, Text: "moved"}}
		err = retryStore(ctx, conflict, func(c context.Context) (err error) { newTok, err = st.CommitHandover(c, h); return err })
		if _, ok := errs.As(err); ok {
			out := &castv1.MigrationSession{SessionId: sid, SourceNode: owner, SourceToken: tok, State: castv1.MigrationState_MIGRATION_STATE_FAILED}
			// A cast error here is fine: a retried Unfence whose first try
			// landed answers CONFLICT (see the report), and a fence left in
			// place only makes later migrations refused, which the model allows.
			err := retryStore(ctx, nil, func(c context.Context) error { _, err := st.Unfence(c, id, out, msRev); return err })
			if _, cast := errs.As(err); err != nil && !cast {
				return err
			}
			rec.add(linMigratorID, in, linOut{}, call)
			continue
		} else if err != nil {
			return err
		}
		rec.add(linMigratorID, in, linOut{Moved: true, Token: newTok}, call)
	}
	return nil
}

// retryStore calls op with short contexts while it fails with a transport
// error (not a cast error) or an error also accepted by retryable; the
// last attempt gets a long context, so a restarting etcd has time to come
// back. Bounded: 30 attempts.
func retryStore(ctx context.Context, retryable func(error) bool, op func(context.Context) error) error {
	var err error
	for attempt := range 30 {
		d := 500 * time.Millisecond
		if attempt == 29 {
			d = 15 * time.Second
		}
		// Not bound to ctx: a migration that has started must be resolved
		// even after the workload's time is up.
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
		err = op(c)
		cancel()
		if _, cast := errs.As(err); err == nil || (cast && (retryable == nil || !retryable(err))) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// checkLinearizable checks ops and, when the result is not want, writes
// porcupine's visualization to the test's temp dir.
func checkLinearizable(t *testing.T, model porcupine.Model, ops []porcupine.Operation, want porcupine.CheckResult) {
	t.Helper()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, linCheckTimeout)
	t.Logf("check (want %s): %s in %v", want, res, time.Since(start).Round(time.Millisecond))
	if res == want {
		return
	}
	path := filepath.Join(t.TempDir(), "linearizability.html")
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		t.Errorf("visualize: %v", err)
	}
	t.Errorf("history of %d ops: %s, want %s; visualization: %s", len(ops), res, want, path)
}
