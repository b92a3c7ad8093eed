package store

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/cast-dev/cast/internal/tick"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Orphan chunks are the chunks of append attempts that never committed: a
// session that did not exist, an owner write refused NOT_OWNER, a retry
// whose first try won, a control plane killed between chunks and envelope.
// SweepChunks deletes them.
//
// Safety does not rest on time. An attempt's chunks are deleted in one txn
// that compares the client id record and the session's seq key with what
// the sweep read (the record absent, or naming another attempt; the session
// as it was, or gone), and an envelope commits only with a compare that the
// attempt's first chunk exists. etcd orders the two txns: if the sweep ran
// first the commit fails (the append is refused, a retry makes a new
// attempt); if the commit ran first the record names the attempt and the
// sweep's compare fails. So no replica can delete chunks a committed
// envelope points at, however many sweep at once.
//
// The grace period is for liveness only: an attempt is looked at once all
// its keys are older than a revision seen at least Grace ago (by this
// process's monotonic clock, so clock skew between replicas does not
// matter), so an append still writing its chunks is left alone.

// sweepBatch bounds the reads of one decision txn (two per attempt).
const sweepBatch = 50

// chunkSet is one attempt's chunks (or one legacy client id's blobs).
type chunkSet struct {
	prefix  string
	session string
	cid     string
	attempt string // "" for legacy blobs
	maxRev  int64  // newest ModRevision among its keys
}

// SweepChunks deletes the chunks of attempts no committed envelope points
// at, among those whose keys were all written at or before revision
// before, and returns how many chunk keys it deleted.
func (s *Store) SweepChunks(ctx context.Context, before int64) (int, error) {
	defer s.observe("sweep_chunks", time.Now())
	sets, err := s.chunkSets(ctx)
	if err != nil {
		return 0, err
	}
	var old []chunkSet
	for _, cs := range sets {
		if cs.maxRev <= before {
			old = append(old, cs)
		}
	}
	deleted := 0
	for lo := 0; lo < len(old); lo += sweepBatch {
		n, err := s.sweepSets(ctx, old[lo:min(lo+sweepBatch, len(old))])
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	s.m.ChunksSwept.Add(float64(deleted))
	return deleted, nil
}

// chunkSets lists every chunk key (keys only, in pages) grouped by attempt.
func (s *Store) chunkSets(ctx context.Context) ([]chunkSet, error) {
	var out []chunkSet
	for _, root := range []string{s.key("chunks") + "/", s.key("blobs") + "/"} {
		err := scanPrefix(ctx, s.cli, root, func(kv *mvccpb.KeyValue) error {
			k := string(kv.Key)
			prefix := k[:strings.LastIndexByte(k, '/')+1]
			if n := len(out); n > 0 && out[n-1].prefix == prefix {
				out[n-1].maxRev = max(out[n-1].maxRev, kv.ModRevision)
				return nil
			}
			parts := strings.Split(strings.TrimSuffix(strings.TrimPrefix(prefix, root), "/"), "/")
			cs := chunkSet{prefix: prefix, maxRev: kv.ModRevision}
			switch {
			case root == s.key("chunks")+"/" && len(parts) == 3:
				cs.session, cs.cid, cs.attempt = parts[0], parts[1], parts[2]
			case root == s.key("blobs")+"/" && len(parts) == 2:
				cs.session, cs.cid = parts[0], parts[1]
			default:
				return nil // not a key this store writes
			}
			out = append(out, cs)
			return nil
		}, clientv3.WithKeysOnly())
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sweepSets decides a batch of sets from their client id records and
// sessions, and deletes the orphans, each under its compares.
func (s *Store) sweepSets(ctx context.Context, sets []chunkSet) (int, error) {
	var reads []clientv3.Op
	for _, cs := range sets {
		reads = append(reads, clientv3.OpGet(s.seqKey(cs.session), clientv3.WithKeysOnly()), clientv3.OpGet(s.cidKey(cs.session, cs.cid)))
	}
	resp, err := s.cli.Txn(ctx).Then(reads...).Commit()
	if err != nil {
		return 0, err
	}
	deleted := 0
	for i, cs := range sets {
		var seqCreate, cidCreate int64
		if kvs := resp.Responses[2*i].GetResponseRange().Kvs; len(kvs) > 0 {
			seqCreate = kvs[0].CreateRevision
		}
		if kvs := resp.Responses[2*i+1].GetResponseRange().Kvs; len(kvs) > 0 {
			cidCreate = kvs[0].CreateRevision
			if seqCreate != 0 && referenced(cs, kvs[0].Value) {
				continue
			}
		}
		tx, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(s.seqKey(cs.session)), "=", seqCreate),
			clientv3.Compare(clientv3.CreateRevision(s.cidKey(cs.session, cs.cid)), "=", cidCreate),
		).Then(clientv3.OpDelete(cs.prefix, clientv3.WithPrefix())).Commit()
		if err != nil {
			return deleted, err
		}
		if tx.Succeeded {
			deleted += int(tx.Responses[0].GetResponseDeleteRange().Deleted)
		}
	}
	return deleted, nil
}

// referenced reports whether the client id record val (of a live session)
// may point at cs: legacy blobs belong to any record of their client id
// (records from before attempts name none), attempt chunks only to the
// record naming their attempt.
func referenced(cs chunkSet, val []byte) bool {
	if cs.attempt == "" {
		return true
	}
	rec, err := parseCidRecord(val)
	return err != nil || rec.attempt == cs.attempt // an unreadable record keeps its chunks
}

// sweeper runs SweepChunks every cfg.SweepEvery over attempts older than
// cfg.SweepGrace, remembering which revision it saw when.
type sweeper struct {
	mu    sync.Mutex
	marks []revMark
}

type revMark struct {
	at  time.Time
	rev int64
}

// watermark records that rev was current at now, and returns the newest
// revision seen at least grace ago (0: none yet).
func (w *sweeper) watermark(now time.Time, rev int64, grace time.Duration) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.marks = append(w.marks, revMark{at: now, rev: rev})
	var mark int64
	i := 0
	for i < len(w.marks) && now.Sub(w.marks[i].at) >= grace {
		mark = w.marks[i].rev
		i++
	}
	if i > 1 { // keep the newest old mark; older ones are superseded
		w.marks = w.marks[i-1:]
	}
	return mark
}

// sweepOnce is one round of the sweeper.
func (s *Store) sweepOnce(ctx context.Context) {
	resp, err := s.cli.Get(ctx, s.key("health"), clientv3.WithCountOnly())
	if err != nil {
		s.lg.Warn("chunk sweep: read revision failed", zap.Error(err))
		return
	}
	before := s.sweep.watermark(time.Now(), resp.Header.Revision, s.cfg.SweepGrace)
	if before == 0 {
		return
	}
	n, err := s.SweepChunks(ctx, before)
	if err != nil && ctx.Err() == nil {
		s.lg.Warn("chunk sweep failed", zap.Int("deleted", n), zap.Error(err))
		return
	}
	if n > 0 {
		s.lg.Info("swept orphan chunks", zap.Int("keys", n))
	}
}

// runSweeper sweeps until ctx ends.
func (s *Store) runSweeper(ctx context.Context) {
	// The first sweep, at once, records the first mark.
	tick.Loop{Every: s.cfg.SweepEvery, First: true}.Run(ctx, func() bool {
		s.sweepOnce(ctx)
		return true
	})
}
