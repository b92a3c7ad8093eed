package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/tick"
)

// History beyond etcd. The hot tail of each session stays in etcd; older
// runs of messages move into segments (segment.go) in an object store, and
// the index entry segs/{s}/{last} says where each run went. A move:
//
//  1. reads a run of envelopes (and chunks) at one revision rev;
//  2. writes the segment (a new object; nothing points at it yet);
//  3. reads it back and checks its digest and contents;
//  4. in one txn, compared against rev (no key of the run changed, no
//     segment of the session was added, the session is the one read),
//     deletes the run's keys and chunks and puts the index entry.
//
// A crash before 4 leaves an object nothing points at (an orphan, swept by
// SweepSegments), never a hole: the keys go only in the txn that names a
// verified segment. A concurrent append, edit or move fails the compare,
// and the run is read again on the next round.

// Objects is the object store history beyond etcd lives in (package
// objstore: a folder or an S3 bucket).
type Objects interface {
	Put(ctx context.Context, key string, data []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, prefix string, fn func(key string, modified time.Time) error) error
}

// Named points of a move, for fault tests (failpoint.FromEnv).
const (
	FailBeforeSegmentWrite = "tier-before-write"
	FailAfterSegmentWrite  = "tier-after-write"
	FailAfterVerify        = "tier-after-verify"
	FailAfterMoveTxn       = "tier-after-txn"
)

// tiering is the store's tiering state, set by UseObjects.
type tiering struct {
	cfg  TierConfig
	fail func(string) // failpoints; nil: none

	mu     sync.Mutex
	seen   map[string]idleMark  // by session: for IdleAge
	pruned map[string]time.Time // by session: its last client id prune
}

// idleMark is a session's last seq and when this replica first saw it.
type idleMark struct {
	last int64
	at   time.Time
}

// UseObjects turns on history beyond etcd over objs with policy cfg; fail
// (may be nil) is called at each named point of a move. Call it before
// Run and before serving reads.
func (s *Store) UseObjects(objs Objects, cfg TierConfig, fail func(string)) error {
	if err := cfg.Validate(s.cfg); err != nil {
		return err
	}
	s.objs = objs
	s.tier = &tiering{cfg: cfg, fail: fail, seen: map[string]idleMark{}, pruned: map[string]time.Time{}}
	return nil
}

func (t *tiering) point(name string) {
	if t.fail != nil {
		t.fail(name)
	}
}

// idle reports whether a session's last seq has stayed last for IdleAge.
func (t *tiering) idle(id string, last int64, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.seen[id]
	if !ok || m.last != last {
		t.seen[id] = idleMark{last: last, at: now}
		return false
	}
	return now.Sub(m.at) >= t.cfg.IdleAge
}

// forget drops the idle marks of sessions that are gone.
func (t *tiering) forget(live map[string]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.seen {
		if _, ok := live[id]; !ok {
			delete(t.seen, id)
		}
	}
	for id := range t.pruned {
		if _, ok := live[id]; !ok {
			delete(t.pruned, id)
		}
	}
}

// runTiering moves history every TierConfig.Every and sweeps orphans
// every quarter of OrphanGrace (a sweep lists the whole object store).
func (s *Store) runTiering(ctx context.Context) {
	var swept time.Time
	tick.Every(ctx, s.tier.cfg.Every, func() bool {
		if _, err := s.Tier(ctx); err != nil && ctx.Err() == nil {
			s.lg.Warn("moving history to the object store failed", zap.Error(err))
		}
		if time.Since(swept) < s.tier.cfg.OrphanGrace/4 {
			return true
		}
		swept = time.Now()
		if _, err := s.SweepSegments(ctx, time.Now().Add(-s.tier.cfg.OrphanGrace)); err != nil && ctx.Err() == nil {
			s.lg.Warn("orphan segment sweep failed", zap.Error(err))
		}
		return true
	})
}

// Tier moves, in every session, what the policy says leaves etcd, and
// returns how many messages moved.
func (s *Store) Tier(ctx context.Context) (int, error) {
	return s.TierAt(ctx, time.Now())
}

// TierAt is Tier as of now (IdleAge, DedupeWindow): tests give the clock.
func (s *Store) TierAt(ctx context.Context, now time.Time) (int, error) {
	if s.tier == nil {
		return 0, nil
	}
	defer s.observe("tier", time.Now())
	seqs, err := s.allSeqs(ctx)
	if err != nil {
		return 0, err
	}
	s.tier.forget(seqs)
	moved := 0
	var errAll error
	for id, last := range seqs {
		n, err := s.TierSession(ctx, id, last, now)
		moved += n
		if err != nil && !errs.HasReason(err, errs.ReasonConflict) {
			errAll = errors.Join(errAll, fmt.Errorf("session %s: %w", id, err))
		}
	}
	return moved, errAll
}

// allSeqs reads every session's last seq (seqs/ keys, in pages).
func (s *Store) allSeqs(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	root := s.key("seqs") + "/"
	err := scanPrefix(ctx, s.cli, root, func(kv *mvccpb.KeyValue) error {
		v, err := parseInt(kv.Value)
		if err != nil {
			return errs.Internal(err, "corrupt seq counter")
		}
		out[strings.TrimPrefix(string(kv.Key), root)] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// maxMovesPerSession bounds one TierSession call; the next round goes on.
const maxMovesPerSession = 64

// TierSession moves a session's history older than its hot tail (all of
// it when idle), and its large parts, to segments, then drops the client
// id records of moved messages older than DedupeWindow (tiercids.go).
// last is its last seq.
func (s *Store) TierSession(ctx context.Context, id string, last int64, now time.Time) (int, error) {
	if s.tier == nil {
		return 0, nil
	}
	cfg := s.tier.cfg
	cut := last - cfg.HotMessages
	if s.tier.idle(id, last, now) {
		cut = last
	}
	moved := 0
	for range maxMovesPerSession {
		first, err := s.firstInEtcd(ctx, id)
		if err != nil || first == 0 || first > cut || (cut < last && cut-first+1 < cfg.MinSegment) {
			break
		}
		n, err := s.moveRun(ctx, id, first, cut)
		moved += n
		if err != nil || n == 0 {
			return moved, err
		}
	}
	n, err := s.moveParts(ctx, id, last-cfg.PartTail)
	if moved += n; err != nil {
		return moved, err
	}
	return moved, s.pruneClientIDs(ctx, id, now)
}

// firstInEtcd returns the lowest seq whose envelope etcd holds (0: none).
func (s *Store) firstInEtcd(ctx context.Context, id string) (int64, error) {
	resp, err := s.cli.Get(ctx, s.msgPrefix(id), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) == 0 {
		return 0, err
	}
	return parseInt([]byte(lastPart(string(resp.Kvs[0].Key))))
}

// run is what a move read: a dense run of messages at one revision.
type run struct {
	rev        int64
	sessCreate int64
	msgs       []segMsg
	chunks     []string // chunk prefixes of chunked messages, deleted with them
	bytes      int
}

// readRun reads at one revision the envelopes from seq from on, through
// cut at most, stopping at a gap (a segment already there) or when the
// segment is full. A run of chunked messages stops before the txn's op
// limit.
func (s *Store) readRun(ctx context.Context, id string, from, cut int64) (*run, error) {
	resp, err := s.cli.Get(ctx, s.sessionKey(id))
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, errs.NotFound("session %s not found", id)
	}
	r := &run{rev: resp.Header.Revision, sessCreate: resp.Kvs[0].CreateRevision}
	cfg := s.tier.cfg
	for next := from; next <= cut && len(r.msgs) < cfg.SegmentMessages && r.bytes < cfg.SegmentBytes; {
		resp, err := s.cli.Get(ctx, s.msgKey(id, next), clientv3.WithRange(s.msgKey(id, cut+1)),
			clientv3.WithLimit(int64(min(envelopeBatch, cfg.SegmentMessages-len(r.msgs)))), clientv3.WithRev(r.rev))
		if err != nil {
			return nil, err
		}
		for _, kv := range resp.Kvs {
			seq, err := parseInt([]byte(lastPart(string(kv.Key))))
			if err != nil || seq != next || r.bytes >= cfg.SegmentBytes || len(r.chunks) >= s.cfg.MaxTxnOps-4 {
				return r, err
			}
			if err := s.addToRun(ctx, r, id, seq, kv.Value); err != nil {
				return nil, err
			}
			next++
		}
		if !resp.More {
			break
		}
	}
	return r, nil
}

// addToRun adds one envelope's message to r.
func (s *Store) addToRun(ctx context.Context, r *run, id string, seq int64, val []byte) error {
	raw, chunks, err := s.messageBytes(ctx, id, val, r.rev)
	if err != nil {
		return err
	}
	if chunks != "" {
		r.chunks = append(r.chunks, chunks)
	}
	r.msgs = append(r.msgs, segMsg{seq: seq, raw: raw})
	r.bytes += len(raw)
	return nil
}

// moveRun moves the run from seq from (through cut at most) to a segment
// and returns how many messages moved (0 and nil: nothing to move).
func (s *Store) moveRun(ctx context.Context, id string, from, cut int64) (int, error) {
	r, err := s.readRun(ctx, id, from, cut)
	if err != nil || len(r.msgs) == 0 {
		return 0, err
	}
	obj, digest, err := encodeSegment(r.msgs)
	if err != nil {
		return 0, err
	}
	ref := segRef{first: r.msgs[0].seq, last: r.msgs[len(r.msgs)-1].seq, rawBytes: int64(r.bytes), objBytes: int64(len(obj)), digest: digest}
	started := time.Now()
	if err := s.writeSegment(ctx, obj, ref); err != nil {
		return 0, err
	}
	// The sweep deletes unreferenced segments older than OrphanGrace; one
	// that took half of it to write and check is left to it.
	if time.Since(started) > s.tier.cfg.OrphanGrace/2 {
		return 0, fmt.Errorf("store: segment took %v to write and check; left for the orphan sweep", time.Since(started))
	}
	// The txn too must end well within the grace (etcd answers in
	// seconds; this bounds a stall).
	cctx, cancel := context.WithTimeout(ctx, s.tier.cfg.OrphanGrace/4)
	defer cancel()
	if err := s.commitMove(cctx, id, r, ref); err != nil {
		return 0, err
	}
	s.m.SegmentsWritten.Inc()
	s.m.BytesMoved.Add(float64(r.bytes))
	return len(r.msgs), nil
}

// writeSegment writes a segment and reads it back: the txn that points at
// it runs only once the object store returned exactly these bytes.
func (s *Store) writeSegment(ctx context.Context, obj []byte, ref segRef) error {
	s.tier.point(FailBeforeSegmentWrite)
	if err := s.objs.Put(ctx, segObjKey(ref.digest), obj); err != nil {
		return err
	}
	s.tier.point(FailAfterSegmentWrite)
	back, err := s.objs.Get(ctx, segObjKey(ref.digest))
	if err != nil {
		return fmt.Errorf("store: read back segment: %w", err)
	}
	if sha256.Sum256(back) != ref.digest {
		return fmt.Errorf("store: segment %x read back with another digest", ref.digest[:8])
	}
	msgs, err := decodeSegment(back, ref.digest, ref.rawBytes)
	if err != nil {
		return err
	}
	if int64(len(msgs)) != ref.last-ref.first+1 || msgs[0].seq != ref.first {
		return fmt.Errorf("store: segment %x read back with other messages", ref.digest[:8])
	}
	s.tier.point(FailAfterVerify)
	return nil
}

// commitMove swaps the run's keys for its segment's index entry in one txn
// guarded by the revision the run was read at.
func (s *Store) commitMove(ctx context.Context, id string, r *run, ref segRef) error {
	segEnd := clientv3.GetPrefixRangeEnd(s.segPrefix(id))
	ops := []clientv3.Op{
		clientv3.OpDelete(s.msgKey(id, ref.first), clientv3.WithRange(s.msgKey(id, ref.last+1))),
		clientv3.OpPut(s.segKey(id, ref.last), ref.String()),
	}
	for _, p := range r.chunks {
		ops = append(ops, clientv3.OpDelete(p, clientv3.WithPrefix()))
	}
	txn, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(s.msgKey(id, ref.first)), "<", r.rev+1).WithRange(s.msgKey(id, ref.last+1)),
		clientv3.Compare(clientv3.ModRevision(s.segPrefix(id)), "<", r.rev+1).WithRange(segEnd),
		clientv3.Compare(clientv3.CreateRevision(s.sessionKey(id)), "=", r.sessCreate),
	).Then(ops...).Commit()
	if err != nil {
		return err
	}
	if !txn.Succeeded {
		s.m.TxnConflicts.WithLabelValues("tier_move").Inc()
		return errs.New(errs.KindAborted, errs.ReasonConflict, "session %s changed during a move; the next round moves it", id)
	}
	s.tier.point(FailAfterMoveTxn)
	return nil
}
