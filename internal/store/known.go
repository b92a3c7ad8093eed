package store

import (
	"strconv"

	"github.com/cast-dev/cast/internal/fence"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// A replica remembers each session's seq and owner keys as its own last
// commit of the session left them, so the session's next round is planned
// without reading them (at load, half of a round's txns were those reads).
// Nothing trusts the memory: the txn compares the seq key's revision and
// value (and the owner's revision, with a guard) as always, so when another replica wrote the
// session since, or a client id is a retry, the txn fails and the keys
// are read after it, from which the session is planned again.
//
// An open-only append (fence.Guard.Open) is planned from memory only when
// the memory says the session is open: a commit of such an append checked
// the record (or a memory of it open), and so did every commit since that
// was planned from memory (its txn saw the seq key unmoved, and an archive
// moves it). The record's other check, a fork's copy finished
// (fence.ForkCopied), cannot be undone: the fork's count only grows. A commit planned from the owner's read, or a notice stored in
// an archived session, leaves a memory not known open: the next open-only
// append reads the record.

// maxKnown bounds the sessions remembered (about 200 bytes each).
const maxKnown = 1 << 16

// knownKeys is what a replica remembers of a session.
type knownKeys struct {
	seq   *mvccpb.KeyValue
	owner []*mvccpb.KeyValue // nil when no commit of the replica read it
	open  bool               // the session was not archived at seq (above)
}

// guess gives b the reads its session's remembered keys imply (client ids
// new, chunks there) and reports whether there was a memory that fits b's
// guard.
func (s *Store) guess(b *sessionBatch) bool {
	c := s.commit
	c.mu.Lock()
	k, ok := c.known[b.id]
	c.mu.Unlock()
	if !ok || (b.guard.Token != 0 && !guardHolds(b.guard, k.owner)) || (openOnly(b.guard) && !k.open) {
		return false
	}
	reads := make([]*etcdserverpb.ResponseOp, 0, 2+2*len(b.reqs))
	second := rangeOf(int64(len(k.owner)), k.owner...)
	if openOnly(b.guard) {
		second = noKey // no record: checkSecond takes the session as open
	}
	reads = append(reads, rangeOf(1, k.seq), second)
	for range b.reqs {
		reads = append(reads, noKey)
	}
	for _, r := range b.reqs {
		if r.p.chunk0 != "" {
			reads = append(reads, oneKey)
		}
	}
	b.reads, b.guessed = reads, true
	return true
}

// noKey and oneKey are the reads guess implies for a new client id and a
// chunk written: shared, as nothing changes reads once made.
var noKey, oneKey = rangeOf(0), rangeOf(1)

func rangeOf(count int64, kvs ...*mvccpb.KeyValue) *etcdserverpb.ResponseOp {
	return &etcdserverpb.ResponseOp{Response: &etcdserverpb.ResponseOp_ResponseRange{
		ResponseRange: &etcdserverpb.RangeResponse{Kvs: kvs, Count: count}}}
}

func guardHolds(g fence.Guard, owner []*mvccpb.KeyValue) bool {
	return len(owner) == 1 && owner[0].ModRevision == g.Token && string(owner[0].Value) == g.Node
}

// remember records b's keys as its txn, committed at rev, left them.
func (s *Store) remember(b *sessionBatch, rev int64) {
	old := b.reads[0].GetResponseRange().Kvs[0]
	seq := &mvccpb.KeyValue{Key: old.Key, CreateRevision: old.CreateRevision, ModRevision: rev,
		Version: old.Version + 1, Value: []byte(strconv.FormatInt(b.plan.next, 10))}
	c := s.commit
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, ok := c.known[b.id]
	if !ok && len(c.known) >= maxKnown {
		for id := range c.known { // any one: the map's order is random
			delete(c.known, id)
			break
		}
	}
	k := knownKeys{seq: seq, owner: b.reads[1].GetResponseRange().Kvs, open: prev.open && b.guessed}
	if openOnly(b.guard) { // it read the record, not the owner
		k.owner, k.open = prev.owner, true
	}
	c.known[b.id] = k
}

// forget drops the memory of b's session (its append failed: the session
// may be gone, or its owner changed, or the outcome is unknown).
func (s *Store) forget(b *sessionBatch) {
	c := s.commit
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.known, b.id)
}
