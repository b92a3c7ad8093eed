package store

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
)

// Group commit across sessions. Appends queue per session, in arrival
// order. One leader at a time takes a round (a batch from each queued
// session, as many as fit one etcd txn) and commits it; appends that
// arrive while a round is in flight wait for the next one. So a txn grows
// with the load and, at low load, an append waits for nothing: no timer
// stands in for batching. Throughput comes from sharing: etcd pays a raft
// entry, an fsync and a round trip per txn, not per append.
//
// Each session's batch keeps its own compares (its seq key's revision, its
// owner's with a guard, its client ids, its chunks), so seqs stay dense and
// a client id is stored once however rounds group sessions, and across
// control plane replicas too. An archive moves the seq key as well, so an
// open-only append (fence.Guard.Open) planned before it fails its txn and
// is refused from the record read after it: the archive check is part of
// the commit at no cost in ops. A round whose txn fails a compare reads the
// same keys again (in a txn of its own): the sessions whose keys did
// not move are committed at once without the others, and only those whose
// keys moved are charged a try and tried again, as they were alone.

// maxAppendTries bounds the tries of one session's batch that conflicted
// with a concurrent writer (another replica) before it is refused.
const maxAppendTries = 20

// roundSlack bounds what one message adds to a txn beyond its envelope:
// its keys (message, client id, in a put, a compare and an else read) and
// its client id record.
const roundSlack = 512

// committer holds the queued appends of every session.
type committer struct {
	mu      sync.Mutex
	queues  map[string][]*appendReq // session -> queued appends, oldest first
	order   []string                // sessions with queued appends, oldest first
	busy    map[string]bool         // sessions in a round in flight
	known   map[string]knownKeys    // sessions' keys as this replica's commits left them (known.go)
	leaders int                     // goroutines committing rounds
	queued  int                     // appends in queues

	txns atomic.Int64 // txns sent by rounds (reads and writes)
}

func newCommitter() *committer {
	return &committer{queues: map[string][]*appendReq{}, busy: map[string]bool{}, known: map[string]knownKeys{}}
}

// sessionBatch is one session's share of a round.
type sessionBatch struct {
	id    string
	reqs  []*appendReq
	guard fence.Guard
	reads []*etcdserverpb.ResponseOp // answers to readOps, from the latest read
	plan  *batchPlan
	last  int64          // the session's seq when read
	cmps  []clientv3.Cmp // the session's compares, plan's included
	tries int
	// guessed: reads come from the replica's memory, not from etcd.
	guessed bool
}

// enqueue queues reqs for sessionID and makes sure a leader commits them.
func (s *Store) enqueue(sessionID string, reqs []*appendReq) {
	c := s.commit
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queues[sessionID]) == 0 {
		c.order = append(c.order, sessionID)
	}
	c.queues[sessionID] = append(c.queues[sessionID], reqs...)
	c.queued += len(reqs)
	// A further round only for a session no round holds: the appends of
	// one busy session wait for its round whoever leads.
	if c.leaders == 0 || (c.leaders < s.cfg.CommitRounds && !c.busy[sessionID] && c.queued >= s.roundFill()) {
		c.leaders++
		go s.lead()
	}
}

// roundFill is how many queued appends start a round beyond the first
// while one is in flight, and keep its leader going: fewer wait for the
// round in flight, so a txn is not spent on a handful of appends that the
// next round would have carried anyway.
func (s *Store) roundFill() int {
	if s.cfg.CommitRoundFill > 0 {
		return s.cfg.CommitRoundFill
	}
	return max(1, s.cfg.MaxTxnOps/9) // a third of a round of one-message sessions
}

// lead commits rounds until nothing it may take is queued (or, with
// another round in flight, too little to fill one).
func (s *Store) lead() {
	var done []string
	for {
		round := s.takeRound(done)
		if round == nil {
			return
		}
		done = done[:0]
		for _, b := range round {
			done = append(done, b.id)
		}
		ctx, cancel := context.WithTimeout(context.Background(), DefaultOpTimeout)
		s.commitRound(ctx, round)
		cancel()
	}
}

// txnBudget is what a round has used of one txn.
type txnBudget struct{ reads, cmps, puts, bytes int }

func (b txnBudget) plus(g txnBudget) txnBudget {
	return txnBudget{b.reads + g.reads, b.cmps + g.cmps, b.puts + g.puts, b.bytes + g.bytes}
}

// takeRound frees the sessions of done (the leader's last round) and
// removes from the queues the batches of its next round: of sessions no
// round in flight holds, so each session's appends commit in order. It
// returns nil (and the leader ends) when there are none. A session whose
// queue is left non-empty moves behind the others, so a long backlog does
// not crowd out the sessions behind it.
func (s *Store) takeRound(done []string) []*sessionBatch {
	c := s.commit
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range done {
		delete(c.busy, id)
	}
	if c.leaders > 1 && c.queued < s.roundFill() {
		// Another round is in flight: its leader takes these next.
		c.leaders--
		return nil
	}
	var round []*sessionBatch
	var used txnBudget
	var rest, again []string
	for i, id := range c.order {
		if c.busy[id] {
			rest = append(rest, id)
			continue
		}
		reqs := s.takeBatch(c.queues[id], &used, len(round) == 0)
		if len(reqs) == 0 { // the txn is full
			rest = append(rest, c.order[i:]...)
			break
		}
		c.busy[id] = true
		c.queued -= len(reqs)
		round = append(round, &sessionBatch{id: id, reqs: reqs, guard: reqs[0].guard})
		if left := c.queues[id][len(reqs):]; len(left) > 0 {
			c.queues[id], again = left, append(again, id)
			continue
		}
		delete(c.queues, id)
	}
	c.order = append(rest, again...)
	if len(round) == 0 {
		c.leaders--
		return nil
	}
	return round
}

// takeBatch returns the longest prefix of queued that shares one guard and
// fits MaxBatchMsgs, MaxBatchBytes and what is left of the round's txn
// (used, updated). The first batch of a round always holds a message.
func (s *Store) takeBatch(queued []*appendReq, used *txnBudget, first bool) []*appendReq {
	if len(queued) == 0 {
		return nil
	}
	n := 0
	next := *used
	// An append that must find the session unmoved (fence.Guard.Unmoved)
	// is checked against the seq before its first message, so it is
	// batched alone and whole: another append's messages in its batch, or
	// its own last ones in the next round, would be stored past a seq it
	// did not check. Append bounds it to one batch (fitsOneBatch).
	whole := queued[0].guard.Unmoved
	// The seq key's two compares and its put, and the owner's compare with
	// a guard only (planSession); reads are seq and owner (or the record:
	// readOps).
	next.reads, next.cmps, next.puts = next.reads+2, next.cmps+2, next.puts+1
	if queued[0].guard.Token != 0 {
		next.cmps++
	}
	for n < len(queued) && n < s.cfg.MaxBatchMsgs && queued[n].guard == queued[0].guard && (!whole || queued[n].call == queued[0].call) {
		grow := growOf(queued[n].p)
		if !(first && (n == 0 || whole)) && !s.fits(next, grow) {
			if whole {
				return nil // the next round, first
			}
			break
		}
		next = next.plus(grow)
		n++
	}
	if n > 0 {
		*used = next
	}
	return queued[:n:n]
}

// growOf is what a message adds to a round's txn.
func growOf(p prepared) txnBudget {
	if p.chunk0 != "" {
		return txnBudget{reads: 2, cmps: 2, puts: 2, bytes: p.size + roundSlack}
	}
	return txnBudget{reads: 1, cmps: 1, puts: 2, bytes: p.size + roundSlack}
}

// fitsOneBatch reports whether reqs, one append's messages, fit one
// session's batch in a round of their own.
func (s *Store) fitsOneBatch(reqs []*appendReq) bool {
	if len(reqs) > s.cfg.MaxBatchMsgs {
		return false
	}
	used := txnBudget{reads: 2, cmps: 3, puts: 1}
	for _, r := range reqs {
		grow := growOf(r.p)
		if !s.fits(used, grow) {
			return false
		}
		used = used.plus(grow)
	}
	return true
}

// fits reports whether grow still fits a txn that has used used.
func (s *Store) fits(used, grow txnBudget) bool {
	ops := s.cfg.MaxTxnOps
	return used.reads+grow.reads <= ops && used.cmps+grow.cmps <= ops && used.puts+grow.puts <= ops &&
		used.bytes+grow.bytes <= s.cfg.MaxBatchBytes
}

// commitRound commits round in one txn and answers every append. When
// the txn fails a compare, the keys are read again: the sessions whose keys did not move are committed at once, without the
// ones that moved, which are tried after them with a try charged.
func (s *Store) commitRound(ctx context.Context, round []*sessionBatch) {
	if err := s.readRound(ctx, round); err != nil {
		s.finishAll(round, err)
		return
	}
	groups := [][]*sessionBatch{round}
	for len(groups) > 0 {
		g := s.planRound(ctx, groups[0])
		groups = groups[1:]
		if len(g) == 0 {
			continue
		}
		if s.beforeTxn != nil {
			s.beforeTxn()
		}
		resp, err := s.writeRound(ctx, g)
		if err != nil {
			// The groups not sent yet fail too: etcd just did.
			err = unknownOutcome(err)
			for _, g := range append(groups, g) {
				s.finishAll(g, err)
			}
			return
		}
		if resp.Succeeded {
			s.settleRound(g, resp.Header.Revision)
			continue
		}
		// A compare failed, so nothing was written: read the group's
		// keys again to tell the batches whose keys moved.
		s.commit.txns.Add(1)
		reads, err := s.cli.Txn(ctx).Then(s.roundReads(g)...).Commit()
		if err != nil {
			for _, g := range append(groups, g) {
				s.finishAll(g, err)
			}
			return
		}
		groups = append(s.splitConflicts(g, reads.Responses), groups...)
	}
}

// readOps are the keys a session's batch is planned from: its seq counter,
// its owner (an open-only append's session record instead: secondKey), its
// client ids, and the first chunk of each chunked message.
func (s *Store) readOps(b *sessionBatch) []clientv3.Op {
	ops := []clientv3.Op{clientv3.OpGet(s.seqKey(b.id)), clientv3.OpGet(s.secondKey(b.id, b.guard))}
	for _, r := range b.reqs {
		ops = append(ops, clientv3.OpGet(s.cidKey(b.id, r.p.msg.ClientId)))
	}
	for _, r := range b.reqs {
		if r.p.chunk0 != "" {
			ops = append(ops, clientv3.OpGet(r.p.chunk0, clientv3.WithCountOnly()))
		}
	}
	return ops
}

// roundReads are the read ops of every batch of round, in order.
func (s *Store) roundReads(round []*sessionBatch) []clientv3.Op {
	var ops []clientv3.Op
	for _, b := range round {
		ops = append(ops, s.readOps(b)...)
	}
	return ops
}

// readRound reads in one txn the keys of every batch whose session the
// replica does not remember (known.go).
func (s *Store) readRound(ctx context.Context, round []*sessionBatch) error {
	var unknown []*sessionBatch
	for _, b := range round {
		if !s.guess(b) {
			unknown = append(unknown, b)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	s.commit.txns.Add(1)
	resp, err := s.cli.Txn(ctx).Then(s.roundReads(unknown)...).Commit()
	if err != nil {
		return err
	}
	splitReads(unknown, resp.Responses)
	return nil
}

// splitReads hands each batch its share of rs, the answers to roundReads.
func splitReads(round []*sessionBatch, rs []*etcdserverpb.ResponseOp) {
	for _, b := range round {
		n := 2 + len(b.reqs)
		for _, r := range b.reqs {
			if r.p.chunk0 != "" {
				n++
			}
		}
		b.reads, rs = rs[:n], rs[n:]
	}
}

// planRound plans every batch from its reads and answers the batches that
// need no write (refused, or every message already stored); it returns
// the batches left to write.
func (s *Store) planRound(ctx context.Context, round []*sessionBatch) []*sessionBatch {
	var left []*sessionBatch
	for _, b := range round {
		if err := s.planSession(ctx, b); err != nil {
			s.forget(b)
			finish(b, err)
			continue
		}
		if b.plan.next == b.last {
			b.plan.settle()
			finish(b, nil)
			continue
		}
		left = append(left, b)
	}
	return left
}

// planSession plans b from its reads: the session must exist, with a
// guard be owned by the guard's node, and for an open-only append not be
// archived nor a fork whose copy stopped part way.
func (s *Store) planSession(ctx context.Context, b *sessionBatch) error {
	seqKV := b.reads[0].GetResponseRange().Kvs
	if len(seqKV) == 0 {
		return sessionNotFound(b.id)
	}
	last, err := parseInt(seqKV[0].Value)
	if err != nil {
		return errs.Internal(err, "corrupt seq counter")
	}
	closed := s.checkSecond(b.id, b.guard, b.reads[1].GetResponseRange().Kvs, last)
	if closed != nil && !openOnly(b.guard) {
		return closed
	}
	plan, err := s.planBatch(ctx, b.id, b.reqs, b.reads[2:], last)
	if err != nil {
		return err
	}
	if closed != nil && plan.next != last {
		// Archived (or a half-copied fork): only a batch that writes
		// nothing, every message a retry of one stored before, is answered
		// as the first call was.
		return closed
	}
	if b.guard.Unmoved {
		// The seq key's compare below makes this check part of the commit.
		if err := unmoved(b.id, b.guard, last, plan); err != nil {
			return err
		}
	}
	b.plan, b.last = plan, last
	// The value too: a memory (known.go) may outlive the revisions it
	// names, as when etcd is restored from a snapshot under a running
	// replica; seqs never repeat a value, so it holds only if no one wrote.
	seqKey := s.seqKey(b.id)
	b.cmps = make([]clientv3.Cmp, 0, 3+len(plan.cmps))
	b.cmps = append(b.cmps, clientv3.Compare(clientv3.ModRevision(seqKey), "=", seqKV[0].ModRevision),
		clientv3.Compare(clientv3.Value(seqKey), "=", string(seqKV[0].Value)))
	if b.guard.Token != 0 {
		b.cmps = append(b.cmps, clientv3.Compare(clientv3.ModRevision(s.ownerKey(b.id)), "=", b.guard.Token))
	}
	b.cmps = append(b.cmps, plan.cmps...)
	return nil
}

// writeRound sends the round's txn: every batch's compares and writes. It
// has no else branch: reading the keys again there would cost every txn
// (etcd decodes a txn's ops twice, and logs them through raft and its WAL)
// for the rare txn whose compares fail; that one reads after it instead.
func (s *Store) writeRound(ctx context.Context, round []*sessionBatch) (*clientv3.TxnResponse, error) {
	nc, no := 0, 0
	for _, b := range round {
		nc, no = nc+len(b.cmps), no+len(b.plan.ops)+1
	}
	cmps, ops := make([]clientv3.Cmp, 0, nc), make([]clientv3.Op, 0, no)
	for _, b := range round {
		cmps = append(cmps, b.cmps...)
		ops = append(ops, b.plan.ops...)
		ops = append(ops, clientv3.OpPut(s.seqKey(b.id), strconv.FormatInt(b.plan.next, 10)))
	}
	s.commit.txns.Add(1)
	return s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
}

// settleRound answers the appends of a round committed at rev.
func (s *Store) settleRound(round []*sessionBatch, rev int64) {
	msgs := int64(0)
	for _, b := range round {
		s.remember(b, rev)
		b.plan.settle()
		msgs += b.plan.next - b.last
		s.m.TranscriptBytes.Add(float64(b.plan.written))
		finish(b, nil)
	}
	s.m.AppendedMessages.Add(float64(msgs))
	s.m.AppendBatchSize.Observe(float64(msgs))
}

// splitConflicts takes the fresh reads of a group whose txn failed a
// compare (rs, their reads after it) and returns the groups to try next: the
// batches whose keys did not move, then those whose keys moved (they
// failed the compares), each charged a try; a batch out of tries is
// refused. A batch planned from memory is not charged: its memory was
// stale, or a client id a retry, and it is planned again from these reads.
func (s *Store) splitConflicts(g []*sessionBatch, rs []*etcdserverpb.ResponseOp) [][]*sessionBatch {
	old := make([][]*etcdserverpb.ResponseOp, len(g))
	for i, b := range g {
		old[i] = b.reads
	}
	splitReads(g, rs)
	var still, moved []*sessionBatch
	guessed := false
	for i, b := range g {
		switch {
		case b.guessed: // planned from memory: these are its first reads
			b.guessed, guessed = false, true
			still = append(still, b)
		case sameKeys(b.guard, old[i], b.reads):
			still = append(still, b)
		default:
			moved = append(moved, b)
		}
	}
	if len(moved) == 0 && !guessed { // cannot happen (no compare failed then), but never loop forever
		still, moved = nil, still
	}
	left := moved[:0]
	for _, b := range moved {
		s.m.TxnConflicts.WithLabelValues("append").Inc()
		if b.tries++; b.tries < maxAppendTries {
			left = append(left, b)
			continue
		}
		s.forget(b)
		finish(b, errs.New(errs.KindAborted, errs.ReasonConflict, "append kept conflicting with concurrent writers; retry with the same client ids"))
	}
	var next [][]*sessionBatch
	for _, g := range [][]*sessionBatch{still, left} {
		if len(g) > 0 {
			next = append(next, g)
		}
	}
	return next
}

// sameKeys reports whether two reads of a batch's keys saw the same
// revisions (the owner only matters with a guard; an open-only append's
// record moves with every state change, and its archive moves the seq key).
func sameKeys(g fence.Guard, a, b []*etcdserverpb.ResponseOp) bool {
	for i := range a {
		if i == 1 && g.Token == 0 {
			continue
		}
		ra, rb := a[i].GetResponseRange(), b[i].GetResponseRange()
		if ra.Count != rb.Count || len(ra.Kvs) != len(rb.Kvs) {
			return false
		}
		for j := range ra.Kvs {
			if ra.Kvs[j].ModRevision != rb.Kvs[j].ModRevision || ra.Kvs[j].CreateRevision != rb.Kvs[j].CreateRevision {
				return false
			}
		}
	}
	return true
}

// unknownOutcome is the error of appends whose txn etcd did not answer: it
// may have committed, and retrying with the same client ids is safe.
func unknownOutcome(err error) error {
	return &errs.Error{Kind: errs.KindUnavailable, Reason: errs.ReasonUnavailable, Err: err,
		Msg: "the append's outcome is unknown (etcd did not answer its commit); retry with the same client ids"}
}

// finish answers every append of b: err, or each message's own outcome.
// A message answered with an error fails its append: the append's later
// messages, still queued, are refused when planned (planBatch).
func finish(b *sessionBatch, err error) {
	for _, r := range b.reqs {
		e := err
		if e == nil {
			e = r.err
		}
		if e != nil {
			r.call.failed.Store(true)
		}
		r.done <- e
	}
}

// finishAll fails every append of round with err, and forgets their
// sessions.
func (s *Store) finishAll(round []*sessionBatch, err error) {
	for _, b := range round {
		s.forget(b)
		finish(b, err)
	}
}
