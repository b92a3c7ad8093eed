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
// status (polled) plus the bytes written since, so a burst between polls is
// counted too.
type quotaGuard struct {
	limit   int64
	dbSize  atomic.Int64
	written atomic.Int64
}

func (q *quotaGuard) init(cfg Config) {
	q.limit = int64(float64(cfg.QuotaBytes) * (1 - cfg.QuotaReserve))
}

// check refuses a write of n bytes that would pass the limit.
func (q *quotaGuard) check(n int) error {
	if q.dbSize.Load()+q.written.Load()+int64(n) > q.limit {
		return errs.New(errs.KindResourceExhausted, errs.ReasonStoreQuota,
			"the store is near its size quota (%d bytes); archive or delete old sessions, or raise --store-quota-bytes", q.limit)
	}
	return nil
}

func (q *quotaGuard) add(n int) { q.written.Add(int64(n)) }

func (s *Store) refreshQuota(ctx context.Context) error {
	eps := s.cli.Endpoints()
	if len(eps) == 0 {
		return fmt.Errorf("no etcd endpoints")
	}
	var last error
	for _, ep := range eps {
		st, err := s.cli.Status(ctx, ep)
		if err != nil {
			last = err
			continue
		}
		s.quota.dbSize.Store(st.DbSize)
		s.quota.written.Store(0)
		s.m.DBSizeBytes.Set(float64(st.DbSize))
		s.m.QuotaBytes.Set(float64(s.quota.limit))
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
	return s.quota.dbSize.Load() + s.quota.written.Load(), s.quota.limit
}
