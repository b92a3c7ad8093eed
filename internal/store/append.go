package store

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
)

type appendReq struct {
	p     prepared
	guard fence.Guard
	call  *appendCall // the Append this message came in
	err   error       // this message's own refusal (its client id reused)
	done  chan error
}

// appendCall is shared by the messages of one Append. Its messages may be
// planned in several batches (rounds); once one is answered with an error,
// those after it must not commit: the caller retries the whole call, and
// its failed message would then get a seq after theirs.
type appendCall struct {
	failed atomic.Bool
}

// Append stores msgs in order and returns them with seq set. Each message
// needs a ClientID; a message whose ClientID is already stored with the same
// body is not stored again, and comes back as committed (its original seq
// and create time); with a different body it is refused (CLIENT_ID_REUSED).
//
// Everything that can refuse the append is checked before a chunk is
// written: ids, sizes, the session, the owner (with g.Open, its archive
// and a fork's copy: checkSecond),
// stored client ids, the quota (chunks included). The commit txn checks
// session, owner (archive) and client ids again; chunks of an attempt it
// refuses are orphans under keys no one else uses. An append of inline
// messages only writes nothing before its commit, so it leaves those
// checks to the commit txn (no extra round trip). With g.Unmoved it also
// checks the session's last seq is g.LastSeq (planSession: unmoved), and
// stores all of msgs or none.
func (s *Store) Append(ctx context.Context, sessionID string, msgs []*castv1.Message, g fence.Guard) ([]*castv1.Message, error) {
	defer s.observe("append", time.Now())
	for _, m := range msgs {
		if !ids.ValidClientID(m.ClientId) {
			return nil, errs.Invalid("message client_id %q is malformed", m.ClientId)
		}
	}
	var stored map[string]*mvccpb.KeyValue
	if s.anyChunked(msgs) {
		// Before serializing: refusing costs no work on 8 MiB messages.
		var err error
		if stored, err = s.precheck(ctx, sessionID, msgs, g); err != nil {
			return nil, err
		}
	}
	encs, first, err := s.encodeAll(msgs)
	if err != nil {
		return nil, err
	}
	fresh, err := s.answerStored(ctx, sessionID, encs, first, stored)
	if err != nil {
		return nil, err
	}
	if len(fresh) > 0 {
		if err := s.appendFresh(ctx, sessionID, fresh, g); err != nil {
			return nil, err
		}
	}
	for i, j := range first { // repeats of a client id within msgs
		if j != i {
			msgs[i].Seq, msgs[i].CreateTime = msgs[j].Seq, msgs[j].CreateTime
		}
	}
	return msgs, nil
}

// anyChunked reports whether a message of msgs may be stored in chunks
// (its create time, not yet set, adds under 32 bytes).
func (s *Store) anyChunked(msgs []*castv1.Message) bool {
	for _, m := range msgs {
		if proto.Size(m)+32 > s.cfg.ChunkBytes {
			return true
		}
	}
	return false
}

// encodeAll checks and serializes msgs. first[i] is the index of the first
// message with msgs[i]'s client id; a repeat must have the same body.
func (s *Store) encodeAll(msgs []*castv1.Message) ([]encoded, []int, error) {
	encs := make([]encoded, len(msgs))
	first := make([]int, len(msgs))
	seen := map[string]int{}
	for i, m := range msgs {
		m.Seq = 0 // the key carries the seq; the envelope must not
		if m.CreateTime == nil {
			m.CreateTime = timestamppb.Now()
		}
		e, err := s.encode(m)
		if err != nil {
			return nil, nil, err
		}
		encs[i], first[i] = e, i
		if j, ok := seen[m.ClientId]; ok {
			if encs[j].digest != e.digest {
				return nil, nil, errs.New(errs.KindAlreadyExists, errs.ReasonClientIDReused,
					"client_id %q appears twice in one append with different bodies", m.ClientId).With("client_id", m.ClientId)
			}
			first[i] = j
			continue
		}
		seen[m.ClientId] = i
	}
	return encs, first, nil
}

// precheckGets bounds the reads of one precheck txn (etcd allows 128 ops).
const precheckGets = 100

// precheck refuses an append to a missing session, by a node that does
// not own it, or open-only to an archived one or a half-copied fork
// (unless every message is stored already: a retry, answered as the first
// call was), and returns the records of
// its client ids already stored, in as few txns as etcd's op limit allows
// (one for up to 98 messages).
func (s *Store) precheck(ctx context.Context, sessionID string, msgs []*castv1.Message, g fence.Guard) (map[string]*mvccpb.KeyValue, error) {
	stored := map[string]*mvccpb.KeyValue{}
	var closed error // archived or half-copied: refused unless every message is a retry
	var last int64
	gets := []clientv3.Op{clientv3.OpGet(s.seqKey(sessionID)), clientv3.OpGet(s.secondKey(sessionID, g))}
	cids := make([]string, 0, len(msgs))
	for i, m := range msgs {
		cids = append(cids, m.ClientId)
		gets = append(gets, clientv3.OpGet(s.cidKey(sessionID, m.ClientId)))
		if len(gets) < precheckGets && i < len(msgs)-1 {
			continue
		}
		resp, err := s.cli.Txn(ctx).Then(gets...).Commit()
		if err != nil {
			return nil, err
		}
		rs := resp.Responses
		if len(rs) > len(cids) { // the first txn: session and owner
			seqKV := rs[0].GetResponseRange().Kvs
			if len(seqKV) == 0 {
				return nil, sessionNotFound(sessionID)
			}
			if last, err = parseInt(seqKV[0].Value); err != nil {
				return nil, errs.Internal(err, "corrupt seq counter")
			}
			if closed = s.checkSecond(sessionID, g, rs[1].GetResponseRange().Kvs, last); closed != nil && !openOnly(g) {
				return nil, closed
			}
			rs = rs[2:]
		}
		for k, cid := range cids {
			if kvs := rs[k].GetResponseRange().Kvs; len(kvs) > 0 {
				stored[cid] = kvs[0]
			}
		}
		gets, cids = gets[:0], cids[:0]
	}
	for _, m := range msgs {
		if _, ok := stored[m.ClientId]; !ok && closed != nil {
			return nil, closed
		}
		if _, ok := stored[m.ClientId]; !ok && g.Unmoved && last != g.LastSeq {
			return nil, sessionChanged(sessionID, g, last) // before its chunks are written
		}
	}
	return stored, nil
}

// answerStored answers the messages whose client id is stored (a retry
// writes nothing), refuses one stored with another body, and returns the
// messages still to store.
func (s *Store) answerStored(ctx context.Context, sessionID string, encs []encoded, first []int, stored map[string]*mvccpb.KeyValue) ([]encoded, error) {
	var fresh []encoded
	for i, e := range encs {
		if first[i] != i {
			continue
		}
		kv, ok := stored[e.msg.ClientId]
		if !ok {
			fresh = append(fresh, e)
			continue
		}
		rec, err := s.committed(ctx, sessionID, kv)
		if err != nil {
			return nil, err
		}
		if err := answerRetry(e.msg, e.digest, rec); err != nil {
			return nil, err
		}
	}
	return fresh, nil
}

// appendFresh reserves quota for the messages' bytes, writes the chunks of
// large ones, and queues them all for the group commit (commit.go).
func (s *Store) appendFresh(ctx context.Context, sessionID string, fresh []encoded, g fence.Guard) error {
	cost := 0
	for _, e := range fresh {
		cost += s.writeCost(e)
	}
	if err := s.reserveQuota(cost); err != nil {
		return err
	}
	defer s.quota.settle(cost)
	reqs := make([]*appendReq, 0, len(fresh))
	call := &appendCall{}
	for _, e := range fresh {
		p, err := s.writeChunks(ctx, sessionID, e)
		if err != nil {
			return err
		}
		reqs = append(reqs, &appendReq{p: p, guard: g, call: call, done: make(chan error, 1)})
	}
	if g.Unmoved && !s.fitsOneBatch(reqs) {
		return errs.Invalid("an append that must find the session unmoved takes one batch: at most %d messages, %d bytes", s.cfg.MaxBatchMsgs, s.cfg.MaxBatchBytes)
	}
	if s.afterChunks != nil {
		s.afterChunks()
	}
	s.enqueue(sessionID, reqs)
	for _, r := range reqs {
		select {
		case err := <-r.done:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			// The outcome is unknown; retrying with the same client ids is safe.
			return ctx.Err()
		}
	}
	return nil
}

func sessionNotFound(id string) error {
	return errs.NotFound("session %s not found; `cast ls` lists sessions", id).With("session", id)
}

// batchPlan is one try at committing a batch: the writes, their compares,
// and each message's outcome, applied (settle) only if the txn commits.
type batchPlan struct {
	ops     []clientv3.Op
	cmps    []clientv3.Cmp
	next    int64
	written int
	seqs    []int64 // per message: its seq, or 0 when refused
	ctimes  []*timestamppb.Timestamp
	refused []error
	batch   []*appendReq
}

func (p *batchPlan) settle() {
	for i, r := range p.batch {
		r.err = p.refused[i]
		if r.err == nil {
			r.p.msg.Seq, r.p.msg.CreateTime = p.seqs[i], p.ctimes[i]
		}
	}
}

// planBatch decides each message of the batch from the reads: a client id
// already stored with the same body is a retry (its committed seq), with
// another body a refusal; an attempt whose chunks were swept is refused
// (retrying makes a new attempt), and so is every later message of an
// append with a message refused (here or in an earlier round); the rest
// get the next seqs.
func (s *Store) planBatch(ctx context.Context, sessionID string, batch []*appendReq, reads []*etcdserverpb.ResponseOp, last int64) (*batchPlan, error) {
	n := len(batch)
	p := &batchPlan{next: last, batch: batch, seqs: make([]int64, n), ctimes: make([]*timestamppb.Timestamp, n), refused: make([]error, n),
		ops: make([]clientv3.Op, 0, 2*n), cmps: make([]clientv3.Cmp, 0, n)}
	var assigned map[string]int           // made for a second message: most batches hold one
	var refusedCalls map[*appendCall]bool // appends with a message refused in this batch
	refuse := func(i int, err error) error {
		if p.refused[i] = err; err != nil {
			if refusedCalls == nil {
				refusedCalls = map[*appendCall]bool{}
			}
			refusedCalls[batch[i].call] = true
		}
		return err
	}
	chunkRead := n
	for i, r := range batch {
		cid := r.p.msg.ClientId
		p.ctimes[i] = r.p.msg.CreateTime
		chunksGone := false
		if r.p.chunk0 != "" {
			chunksGone = reads[chunkRead].GetResponseRange().Count == 0
			chunkRead++
		}
		if kvs := reads[i].GetResponseRange().Kvs; len(kvs) > 0 { // stored earlier: a retry
			rec, err := s.committed(ctx, sessionID, kvs[0])
			if err != nil {
				return nil, err
			}
			m := proto.Clone(r.p.msg).(*castv1.Message)
			if refuse(i, answerRetry(m, r.p.digest, rec)) == nil {
				p.seqs[i], p.ctimes[i] = m.Seq, m.CreateTime
			}
			p.cmps = append(p.cmps, clientv3.Compare(clientv3.CreateRevision(s.cidKey(sessionID, cid)), "=", kvs[0].CreateRevision))
			continue
		}
		if r.call.failed.Load() || refusedCalls[r.call] {
			// An earlier message of its append was not stored: storing
			// this one would put it before that one's retry.
			refuse(i, errs.New(errs.KindAborted, errs.ReasonConflict,
				"an earlier message of the append was not stored; retry the append with the same client ids"))
			continue
		}
		if j, ok := assigned[cid]; ok { // same client id twice in one batch
			rec := newCidRecord(p.seqs[j], batch[j].p)
			m := proto.Clone(r.p.msg).(*castv1.Message)
			if refuse(i, answerRetry(m, r.p.digest, rec)) == nil {
				p.seqs[i], p.ctimes[i] = m.Seq, m.CreateTime
			}
			continue
		}
		if chunksGone {
			refuse(i, errs.New(errs.KindAborted, errs.ReasonConflict,
				"the append waited so long its chunks were collected; retry with the same client id"))
			continue
		}
		p.next++
		if n > 1 {
			if assigned == nil {
				assigned = make(map[string]int, n)
			}
			assigned[cid] = i
		}
		p.seqs[i] = p.next
		p.cmps = append(p.cmps, clientv3.Compare(clientv3.CreateRevision(s.cidKey(sessionID, cid)), "=", 0))
		p.cmps = append(p.cmps, r.p.cmps...)
		p.ops = append(p.ops,
			clientv3.OpPut(s.msgKey(sessionID, p.next), string(r.p.envelope)),
			clientv3.OpPut(s.cidKey(sessionID, cid), newCidRecord(p.next, r.p).String()))
		p.written += len(r.p.envelope)
	}
	return p, nil
}

// unmoved refuses a batch under g (fence.Guard.Unmoved), planned at last,
// whole: when it stores a message past a seq other than g.LastSeq (a
// message came in since the caller's check), or when a message of it is
// refused (its others must not be stored without it). A batch that stores
// nothing, every message a retry, is answered as the first call was.
func unmoved(sessionID string, g fence.Guard, last int64, plan *batchPlan) error {
	for _, err := range plan.refused {
		if err != nil {
			return err
		}
	}
	if plan.next == last || last == g.LastSeq {
		return nil
	}
	return sessionChanged(sessionID, g, last)
}

func sessionChanged(sessionID string, g fence.Guard, last int64) error {
	return errs.New(errs.KindAborted, errs.ReasonSessionChanged,
		"session %s got messages %d:%d since it was checked; nothing was stored", sessionID, g.LastSeq+1, last).
		With("session", sessionID).With("last_seq", strconv.FormatInt(last, 10))
}

// openOnly reports whether g's append is refused by an archived session,
// or by a fork whose copy of its parent stopped part way (fence.ForkCopied).
// Its batch reads the session's record where others read the owner (which
// a user append never compares), so the check costs the round no op; the
// archive moves the seq key, which every append's txn compares (mutate),
// and a fork's count only grows, so a check passed stays passed.
func openOnly(g fence.Guard) bool { return g.Open && g.Token == 0 }

// secondKey is what a batch reads besides its seq key: the owner, or an
// open-only append's session record.
func (s *Store) secondKey(sessionID string, g fence.Guard) string {
	if openOnly(g) {
		return s.sessionKey(sessionID)
	}
	return s.ownerKey(sessionID)
}

// checkSecond refuses an append by what secondKey read: an owner-side one
// whose node does not own the session, an open-only one to an archived
// session or to a fork holding last of the messages it copies from its
// parent, fewer than all (last: the seq key, read beside the record; the
// record keeps no last_seq). A record archived before archives moved the
// seq key (its data kept from an earlier version) is refused the same way:
// it is read whenever the replica has no memory of the session open
// (known.go).
func (s *Store) checkSecond(sessionID string, g fence.Guard, kvs []*mvccpb.KeyValue, last int64) error {
	if !openOnly(g) {
		return s.checkGuard(g, kvs)
	}
	if len(kvs) == 0 { // planned from a memory of the session open (guess)
		return nil
	}
	sess := &castv1.Session{}
	if err := proto.Unmarshal(kvs[0].Value, sess); err != nil {
		return errs.Internal(err, "decode session")
	}
	if sess.Archived {
		return fence.Archived(sessionID)
	}
	return fence.ForkCopied(sess, last)
}

// checkGuard refuses an owner-side write whose token is not the current
// owner key's revision: the node lost the session (or never had it).
func (s *Store) checkGuard(g fence.Guard, ownKV []*mvccpb.KeyValue) error {
	if g.Token == 0 {
		return nil
	}
	if len(ownKV) == 0 || ownKV[0].ModRevision != g.Token || string(ownKV[0].Value) != g.Node {
		s.m.OwnerWritesRejected.WithLabelValues("not_owner").Inc()
		cur := ""
		if len(ownKV) > 0 {
			cur = string(ownKV[0].Value)
		}
		return errs.New(errs.KindFailedPrecondition, errs.ReasonNotOwner,
			"node %q with token %d does not own the session (owner: %q)", g.Node, g.Token, cur).
			With("owner", cur)
	}
	return nil
}
