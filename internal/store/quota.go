package store

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/cast-dev/cast/internal/errs"
)

// quotaGuard refuses writes before etcd's backend quota is hit: once etcd
// raises NOSPACE the whole cluster goes read-only, which is far worse than a
// clear RESOURCE_EXHAUSTED on one append. The db size comes from etcd's
// status (polled) plus the bytes written since, plus the bytes appends have
// reserved and not yet written, so a burst between polls is counted too,
// and concurrent appends cannot together pass the limit.
type quotaGuard struct {
	limit   int64
	dbSize  atomic.Int64
	written atomic.Int64 // since the poll before last
	pending atomic.Int64 // reserved by appends in progress
	seen    int64        // written as the last poll began (the poller's own)
}

// keyOverhead is what etcd spends on each stored key beyond its value:
// its cost in etcd's own quota (256), the revision index, and the bbolt
// page a large value's overflow run is rounded up to.
const keyOverhead = 256 + 4096

func (q *quotaGuard) init(cfg Config) {
	q.limit = int64(float64(cfg.QuotaBytes) * (1 - cfg.QuotaReserve))
}

func (q *quotaGuard) used() int64 { return q.dbSize.Load() + q.written.Load() + q.pending.Load() }

func (q *quotaGuard) refusal() error {
	return errs.New(errs.KindResourceExhausted, errs.ReasonStoreQuota,
		"the store is near its size quota (%d bytes); archive or delete old sessions, or raise --store-quota-bytes", q.limit)
}

// check refuses a write of n bytes that would pass the limit.
func (q *quotaGuard) check(n int) error {
	if q.used()+int64(n) > q.limit {
		return q.refusal()
	}
	return nil
}

// reserve holds n bytes for a write about to happen, or refuses it.
func (q *quotaGuard) reserve(n int) error {
	for {
		p := q.pending.Load()
		if q.dbSize.Load()+q.written.Load()+p+int64(n) > q.limit {
			return q.refusal()
		}
		if q.pending.CompareAndSwap(p, p+int64(n)) {
			return nil
		}
	}
}

// settle ends a reservation: its bytes count as written until the next
// poll sees them in etcd's size (a refused append's orphan chunks too:
// they take space until swept and compacted).
func (q *quotaGuard) settle(n int) {
	q.pending.Add(-int64(n))
	q.written.Add(int64(n))
}

// writeCost is what appending e costs etcd: its bytes once (in chunks or
// inline) plus a quarter for bbolt's fragmentation, and per key written
// (chunks, envelope, client id record). Measured on 7 MiB messages, the
// file grows 3% over the bytes on an idle machine and 24% on a loaded one
// (pages freed while a read txn is open are not reused); the poll replaces
// the estimate with etcd's real size every QuotaPoll.
func (s *Store) writeCost(e encoded) int {
	return len(e.raw) + len(e.raw)/4 + (s.chunks(e)+2)*(keyOverhead+len(s.cfg.Prefix)+96)
}

// spend reserves what writing n value bytes under one key costs, runs
// write, and counts the bytes as written (until the next polls see them).
func (s *Store) spend(n int, write func() error) error {
	cost := n + n/4 + keyOverhead
	if err := s.reserveQuota(cost); err != nil {
		return err
	}
	defer s.quota.settle(cost)
	return write()
}

// reserveQuota is reserve plus the metric.
func (s *Store) reserveQuota(n int) error {
	if err := s.quota.reserve(n); err != nil {
		s.m.QuotaRejections.Inc()
		return err
	}
	return nil
}

func (s *Store) refreshQuota(ctx context.Context) error {
	eps := s.cli.Endpoints()
	if len(eps) == 0 {
		return fmt.Errorf("no etcd endpoints")
	}
	var last error
	w0 := s.quota.written.Load()
	for _, ep := range eps {
		st, err := s.cli.Status(ctx, ep)
		if err != nil {
			last = err
			continue
		}
		// etcd's size lags what it acknowledged by a backend commit
		// (100ms), so bytes are dropped from written one poll late: those
		// written before the previous poll began are surely in DbSize.
		// Until then they count twice, which errs on the safe side.
		s.quota.dbSize.Store(st.DbSize)
		s.quota.written.Add(-s.quota.seen)
		s.quota.seen = w0 - s.quota.seen
		s.m.DBSizeBytes.Set(float64(st.DbSize))
		s.m.QuotaBytes.Set(float64(s.quota.limit))
		s.m.BackendQuotaBytes.Set(float64(s.cfg.QuotaBytes))
		return nil
	}
	return last
}

// checkQuota is check plus the metric.
func (s *Store) checkQuota(n int) error {
	if err := s.quota.check(n); err != nil {
		s.m.QuotaRejections.Inc()
		return err
	}
	return nil
}

// Usage returns the db size last seen plus bytes written since, and the
// size at which writes are refused.
func (s *Store) Usage() (used, limit int64) {
	return s.quota.used(), s.quota.limit
}
