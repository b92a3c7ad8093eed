package store

import (
	"context"
	"errors"
	"slices"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// segIndexBatch is how many segment index entries one read fetches.
const segIndexBatch = 64

// segCacheSize is how many decoded segments a replica keeps: a listing or
// export pages through one segment in several calls.
const segCacheSize = 4

// segCache keeps the last few segments read, by digest (they never
// change); a segment being read is there too, so a reader and the
// export's read-ahead never read one twice.
type segCache struct {
	mu    sync.Mutex
	order [][32]byte
	segs  map[[32]byte]*segEntry
}

type segEntry struct {
	done chan struct{} // closed once msgs or err is set
	msgs []segMsg
	err  error
}

// entry returns d's entry, making it when there is none (own: the caller
// must fill it).
func (c *segCache) entry(d [32]byte) (e *segEntry, own bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.segs[d]; ok {
		return e, false
	}
	if c.segs == nil {
		c.segs = map[[32]byte]*segEntry{}
	}
	if len(c.order) >= segCacheSize {
		delete(c.segs, c.order[0])
		c.order = c.order[1:]
	}
	e = &segEntry{done: make(chan struct{})}
	c.order, c.segs[d] = append(c.order, d), e
	return e, true
}

// drop forgets a failed read, so the next reader tries again.
func (c *segCache) drop(d [32]byte, e *segEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.segs[d] == e {
		delete(c.segs, d)
		c.order = slices.DeleteFunc(c.order, func(x [32]byte) bool { return x == d })
	}
}

// segmentsFrom reads, at rev, the index entries of the segments that end
// at or after seq start, in order (at most segIndexBatch; more says there
// are more).
func (s *Store) segmentsFrom(ctx context.Context, sessionID string, start int64, rev int64) ([]segRef, bool, error) {
	resp, err := s.cli.Get(ctx, s.segKey(sessionID, start), clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.segPrefix(sessionID))),
		clientv3.WithLimit(segIndexBatch), clientv3.WithRev(rev))
	if err != nil {
		return nil, false, compactedAsToken(err)
	}
	out := make([]segRef, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		r, err := parseSegRef(kv.Value)
		if err != nil {
			return nil, false, errs.Internal(err, "read segment index")
		}
		out = append(out, r)
	}
	return out, resp.More, nil
}

// segment returns a segment's messages, from the cache or the object store.
// A read another caller began and failed (its context ended, say) is
// tried once more by this one.
func (s *Store) segment(ctx context.Context, r segRef) ([]segMsg, error) {
	for try := 0; ; try++ {
		e, own := s.segs.entry(r.digest)
		if own {
			e.msgs, e.err = s.loadSegment(ctx, r)
			if e.err != nil {
				s.segs.drop(r.digest, e)
			}
			close(e.done)
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err == nil || own || try > 0 {
			return e.msgs, e.err
		}
	}
}

func (s *Store) loadSegment(ctx context.Context, r segRef) ([]segMsg, error) {
	if s.objs == nil {
		return nil, errs.Internal(nil, "history is in the object store, and this control plane has none configured")
	}
	obj, err := s.objs.Get(ctx, segObjKey(r.digest))
	if err != nil {
		return nil, errs.Internal(err, "read segment")
	}
	msgs, err := decodeSegment(obj, r.digest, r.rawBytes)
	if err != nil {
		return nil, errs.Internal(err, "read segment")
	}
	return msgs, nil
}

// rangeRead is one readRange call's progress: messages in order, bounded
// by a count and a byte budget (the first message always fits).
type rangeRead struct {
	out    []*castv1.Message
	used   int
	limit  int
	budget int
}

// fits reports whether a message of size bytes may join the page.
func (r *rangeRead) fits(size int) bool {
	return len(r.out) < r.limit && (len(r.out) == 0 || r.used+size+msgFrame <= r.budget)
}

func (r *rangeRead) add(m *castv1.Message, size int) {
	r.out, r.used = append(r.out, m), r.used+size+msgFrame
}

// fromSegment adds seg's messages from start through end; full says the
// page filled before they ran out.
func (s *Store) fromSegment(ctx context.Context, r *rangeRead, seg segRef, start, end int64) (bool, error) {
	msgs, err := s.segment(ctx, seg)
	if err != nil {
		return false, err
	}
	for _, sm := range msgs[min(int64(len(msgs)), max(0, start-seg.first)):] {
		if sm.seq > end {
			break
		}
		if !r.fits(len(sm.raw)) {
			return true, nil
		}
		m := &castv1.Message{}
		if err := proto.Unmarshal(sm.raw, m); err != nil {
			return false, errs.Internal(err, "decode message")
		}
		m.Seq = sm.seq
		r.add(m, len(sm.raw))
	}
	return false, nil
}

// fromEtcd adds the messages etcd holds from start through end (none of
// them in a segment) at rev, one batch; it returns the next seq to read
// and whether the page filled.
func (s *Store) fromEtcd(ctx context.Context, r *rangeRead, sessionID string, start, end, rev int64) (int64, bool, error) {
	resp, err := s.cli.Get(ctx, s.msgKey(sessionID, start),
		clientv3.WithRange(s.msgKey(sessionID, end+1)), clientv3.WithLimit(int64(min(r.limit-len(r.out), envelopeBatch))), clientv3.WithRev(rev))
	if err != nil {
		return 0, false, compactedAsToken(err)
	}
	if len(resp.Kvs) == 0 {
		return 0, false, errs.Internal(errors.New("no message and no segment"), "transcript has a gap")
	}
	for _, kv := range resp.Kvs {
		size, err := envelopeSize(kv.Value)
		if err != nil {
			return 0, false, errs.Internal(err, "decode message")
		}
		if !r.fits(size) {
			return 0, true, nil
		}
		m, err := s.decodeKV(ctx, sessionID, kv.Key, kv.Value, rev)
		if err != nil {
			return 0, false, errs.Internal(err, "decode message")
		}
		if m.Seq != start {
			return 0, false, errs.Internal(errors.New("seq out of order"), "transcript has a gap")
		}
		r.add(m, size)
		start++
	}
	return start, false, nil
}

// readRange reads messages with start <= seq <= end at rev, from etcd and
// the segments the history beyond etcd is in: at most limit, and no more
// than budget bytes of them except that the first is always read (a
// message is at most MaxMessageBytes). more says the range has more.
// Envelopes and segments give each message's size before it is decoded.
// A move deletes a run's keys and adds its segment's index entry in one
// txn, so a read at one revision sees every message exactly once.
func (s *Store) readRange(ctx context.Context, sessionID string, start, end int64, limit, budget int, rev int64) ([]*castv1.Message, bool, error) {
	r := &rangeRead{limit: limit, budget: budget}
	segs, more, err := s.segmentsFrom(ctx, sessionID, start, rev)
	if err != nil {
		return nil, false, err
	}
	for start <= end {
		if len(r.out) >= limit {
			return r.out, true, nil
		}
		for len(segs) > 0 && segs[0].last < start {
			segs = segs[1:]
		}
		if len(segs) == 0 && more { // the batch ran out
			if segs, more, err = s.segmentsFrom(ctx, sessionID, start, rev); err != nil {
				return nil, false, err
			}
		}
		full := false
		if len(segs) > 0 && segs[0].first <= start {
			full, err = s.fromSegment(ctx, r, segs[0], start, end)
			start = segs[0].last + 1
		} else {
			stop := end
			if len(segs) > 0 {
				stop = min(end, segs[0].first-1)
			}
			start, full, err = s.fromEtcd(ctx, r, sessionID, start, stop, rev)
		}
		if err != nil || full {
			return r.out, full, err
		}
	}
	return r.out, false, nil
}
