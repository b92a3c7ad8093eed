package store

import (
	"context"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
)

// Guard makes an append owner-side: it commits only while the session's
// owner is Node with fencing token Token. The zero Guard is a user append,
// which never depends on the owner (a fenced session still takes messages).
type Guard struct {
	Node  string
	Token int64
}

type appendReq struct {
	p     prepared
	guard Guard
	done  chan error
}

// appendQueue is one session's group commit: concurrent appends to a
// session share a txn, which is where throughput comes from on etcd (one
// fsync for many messages). Seqs stay dense because one drainer per session
// assigns them, and the txn's compare on the seq key keeps them dense across
// control plane replicas too.
type appendQueue struct {
	pending []*appendReq
	running bool
}

// Append stores msgs in order and returns them with seq set. Each message
// needs a ClientID; a message whose ClientID is already stored is not stored
// again, and comes back with its original seq.
func (s *Store) Append(ctx context.Context, sessionID string, msgs []*castv1.Message, g Guard) ([]*castv1.Message, error) {
	defer s.observe("append", time.Now())
	reqs := make([]*appendReq, 0, len(msgs))
	size := 0
	for _, m := range msgs {
		if !ids.ValidClientID(m.ClientId) {
			return nil, errs.Invalid("message client_id %q is malformed", m.ClientId)
		}
		m.Seq = 0 // the key carries the seq; the envelope must not
		if m.CreateTime == nil {
			m.CreateTime = timestamppb.Now()
		}
	}
	for _, m := range msgs {
		if err := s.checkQuota(size + 1024); err != nil {
			return nil, err
		}
		p, err := s.prepare(ctx, sessionID, m)
		if err != nil {
			return nil, err
		}
		size += p.size
		reqs = append(reqs, &appendReq{p: p, guard: g, done: make(chan error, 1)})
	}
	if err := s.checkQuota(size); err != nil {
		return nil, err
	}
	s.enqueue(sessionID, reqs)
	for _, r := range reqs {
		select {
		case err := <-r.done:
			if err != nil {
				return nil, err
			}
		case <-ctx.Done():
			// The outcome is unknown; retrying with the same client ids is safe.
			return nil, ctx.Err()
		}
	}
	return msgs, nil
}

func (s *Store) enqueue(sessionID string, reqs []*appendReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[sessionID]
	if q == nil {
		q = &appendQueue{}
		s.queues[sessionID] = q
	}
	q.pending = append(q.pending, reqs...)
	if !q.running {
		q.running = true
		go s.drain(sessionID, q)
	}
}

// drain commits the queue's pending appends batch by batch until it is empty.
func (s *Store) drain(sessionID string, q *appendQueue) {
	for {
		s.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			delete(s.queues, sessionID)
			s.mu.Unlock()
			return
		}
		batch := s.takeBatch(q)
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), DefaultOpTimeout)
		err := s.commitBatch(ctx, sessionID, batch)
		cancel()
		for _, r := range batch {
			r.done <- err
		}
	}
}

// takeBatch removes a prefix of pending that shares one guard and fits the
// txn limits. Called with s.mu held.
func (s *Store) takeBatch(q *appendQueue) []*appendReq {
	g := q.pending[0].guard
	n, bytes := 0, 0
	for n < len(q.pending) && n < s.cfg.MaxBatchMsgs {
		r := q.pending[n]
		if r.guard != g || (n > 0 && bytes+r.p.size > s.cfg.MaxBatchBytes) {
			break
		}
		bytes += r.p.size
		n++
	}
	batch := q.pending[:n:n]
	q.pending = q.pending[n:]
	return batch
}

// commitBatch assigns seqs and commits the batch in one txn, retrying when a
// concurrent writer (another replica) moved the seq counter.
func (s *Store) commitBatch(ctx context.Context, sessionID string, batch []*appendReq) error {
	g := batch[0].guard
	for attempt := 0; attempt < 20; attempt++ {
		reads := []clientv3.Op{clientv3.OpGet(s.seqKey(sessionID)), clientv3.OpGet(s.ownerKey(sessionID))}
		for _, r := range batch {
			reads = append(reads, clientv3.OpGet(s.cidKey(sessionID, r.p.msg.ClientId)))
		}
		resp, err := s.cli.Txn(ctx).Then(reads...).Commit()
		if err != nil {
			return err
		}
		seqKV := resp.Responses[0].GetResponseRange().Kvs
		if len(seqKV) == 0 {
			return errs.NotFound("session %s not found; `cast ls` lists sessions", sessionID).With("session", sessionID)
		}
		last, err := parseInt(seqKV[0].Value)
		if err != nil {
			return errs.Internal(err, "corrupt seq counter")
		}
		ownKV := resp.Responses[1].GetResponseRange().Kvs
		if err := s.checkGuard(g, ownKV); err != nil {
			return err
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.seqKey(sessionID)), "=", seqKV[0].ModRevision)}
		if g.Token != 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.ownerKey(sessionID)), "=", g.Token))
		}
		var ops []clientv3.Op
		assigned := map[string]int64{}
		next, written := last, 0
		for i, r := range batch {
			cid := r.p.msg.ClientId
			if kvs := resp.Responses[i+2].GetResponseRange().Kvs; len(kvs) > 0 {
				seq, _ := parseInt(kvs[0].Value) // stored earlier: idempotent retry
				r.p.msg.Seq = seq
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.cidKey(sessionID, cid)), "=", kvs[0].CreateRevision))
				continue
			}
			if seq, ok := assigned[cid]; ok { // same client id twice in one batch
				r.p.msg.Seq = seq
				continue
			}
			next++
			assigned[cid] = next
			r.p.msg.Seq = next
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.cidKey(sessionID, cid)), "=", 0))
			ops = append(ops,
				clientv3.OpPut(s.msgKey(sessionID, next), string(r.p.envelope)),
				clientv3.OpPut(s.cidKey(sessionID, cid), strconv.FormatInt(next, 10)))
			written += len(r.p.envelope)
		}
		if next == last {
			return nil // every message was already stored
		}
		ops = append(ops, clientv3.OpPut(s.seqKey(sessionID), strconv.FormatInt(next, 10)))
		tx, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return err
		}
		if tx.Succeeded {
			s.quota.add(written)
			s.m.AppendedMessages.Add(float64(next - last))
			s.m.AppendBatchSize.Observe(float64(next - last))
			s.m.TranscriptBytes.Add(float64(written))
			return nil
		}
		s.m.TxnConflicts.WithLabelValues("append").Inc()
	}
	return errs.New(errs.KindAborted, errs.ReasonConflict, "append kept conflicting with concurrent writers; retry with the same client ids")
}

// checkGuard refuses an owner-side write whose token is not the current
// owner key's revision: the node lost the session (or never had it).
func (s *Store) checkGuard(g Guard, ownKV []*mvccpb.KeyValue) error {
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
