package store

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Client id records of moved history. Every appended message writes
// cids/{s}/{cid} (clientids.go): the exactly-once dedupe key, ~350-400
// bytes in etcd with bbolt's share. Kept forever, they would make etcd
// grow with history even once the messages are in segments. So a record
// leaves etcd once both:
//
//   - its message left etcd (its envelope is gone: a move took it, in a
//     txn that also put the segment's index entry), and
//   - it is older than DedupeWindow (its create time, stamped by the
//     store when the message committed).
//
// A retry within the window finds the record and gets the stored message
// back, as before, whether the message is in etcd or in a segment. A
// retry after it is a new message: clients retry within seconds, nodes
// within their reconnect (DedupeWindow is a week by default). Records
// from before create times were kept (seq only) stay.
//
// The deletes are not in the move's txn: a run of 2000 messages would
// need 2000 deletes (their keys are by client id, not seq) in a txn etcd
// caps at 128 ops. Each delete compares the record's create revision and
// the envelope's absence, so it deletes only what was read.

// cidPruneEvery is how often one replica reads a session's records.
const cidPruneEvery = time.Hour

// prune reports whether session id's records are due a look as of now,
// and marks it looked at.
func (t *tiering) prune(id string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if at, ok := t.pruned[id]; ok && now.Sub(at) < cidPruneEvery && !now.Before(at) {
		return false
	}
	t.pruned[id] = now
	return true
}

// cidCandidate is a record old enough to go, if its message moved.
type cidCandidate struct {
	key       string
	seq       int64
	createRev int64
}

// pruneClientIDs deletes session id's client id records whose message
// moved to a segment more than DedupeWindow after it was appended.
func (s *Store) pruneClientIDs(ctx context.Context, id string, now time.Time) error {
	if !s.tier.prune(id, now) {
		return nil
	}
	// A session nothing moved out of has no record to drop: its records
	// are not read at all.
	segs, err := s.cli.Get(ctx, s.segPrefix(id), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || segs.Count == 0 {
		return err
	}
	cands, err := s.oldClientIDs(ctx, id, now.Add(-s.tier.cfg.DedupeWindow).UnixNano())
	if err != nil || len(cands) == 0 {
		return err
	}
	batch := max(1, (s.cfg.MaxTxnOps-1)/2)
	for lo := 0; lo < len(cands); lo += batch {
		if err := s.dropMoved(ctx, id, cands[lo:min(lo+batch, len(cands))]); err != nil {
			return err
		}
	}
	return nil
}

// oldClientIDs reads the session's records created before cutoff (unix
// ns), in pages; each is judged alone, so the pages need no one revision.
func (s *Store) oldClientIDs(ctx context.Context, id string, cutoff int64) ([]cidCandidate, error) {
	var out []cidCandidate
	err := scanPrefix(ctx, s.cli, s.key("cids", id)+"/", func(kv *mvccpb.KeyValue) error {
		r, err := parseCidRecord(kv.Value)
		if err != nil {
			return err
		}
		if r.ctime > 0 && r.ctime < cutoff {
			out = append(out, cidCandidate{key: string(kv.Key), seq: r.seq, createRev: kv.CreateRevision})
		}
		return nil
	})
	return out, err
}

// dropMoved deletes, of cands, the records whose envelope etcd no longer
// holds. An envelope leaves etcd only in a move (or a purge, which deletes
// the records too) and never comes back, so an envelope read absent stays
// absent when the delete commits.
func (s *Store) dropMoved(ctx context.Context, id string, cands []cidCandidate) error {
	gets := make([]clientv3.Op, len(cands))
	for i, c := range cands {
		gets[i] = clientv3.OpGet(s.msgKey(id, c.seq), clientv3.WithCountOnly())
	}
	resp, err := s.cli.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		return err
	}
	var cmps []clientv3.Cmp
	var dels []clientv3.Op
	for i, c := range cands {
		if resp.Responses[i].GetResponseRange().Count > 0 {
			continue // still in etcd: hot tail, or not moved yet
		}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.createRev))
		dels = append(dels, clientv3.OpDelete(c.key))
	}
	if len(dels) == 0 {
		return nil
	}
	txn, err := s.cli.Txn(ctx).If(cmps...).Then(dels...).Commit()
	if err != nil {
		return err
	}
	if !txn.Succeeded {
		s.m.TxnConflicts.WithLabelValues("prune_client_ids").Inc()
		return nil // a record changed under us: the next prune reads it again
	}
	s.m.ClientIDsPruned.Add(float64(len(dels)))
	return nil
}
