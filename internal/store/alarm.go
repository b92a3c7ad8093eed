package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/retry"
)

// Once etcd's backend reaches its quota it raises the NOSPACE alarm and
// refuses every write (a node cannot even register) until someone
// compacts, defragments and disarms. The store does that itself: every
// replica checks the alarms with each quota poll and, when NOSPACE is up,
// sweeps orphan chunks (deletes are allowed under the alarm), compacts to
// the current revision, defragments each member and, if the data now fits,
// disarms. Every step is idempotent (compacting an already compacted
// revision, defragmenting twice, disarming a disarmed alarm), so replicas
// recovering at once need no lock, which could not be taken anyway: etcd
// refuses the lease and put a lock needs.
//
// Compacting to the current revision drops history: a page token or watch
// at an older revision gets INVALID_PAGE_TOKEN or UNAVAILABLE and starts
// again (as after the periodic compaction), and chunk reads fall back to
// the latest revision (chunks never change once written). Committed data
// is untouched.

const (
	recoveryGap        = 10 * time.Second // between two recoveries
	recoveryMaxBackoff = 5 * time.Minute  // after failures, doubling up to this
	defragTimeout      = 5 * time.Minute  // one member's defragmentation
)

// alarmState paces recoveries and reclaims; only Run's goroutine
// touches it.
type alarmState struct {
	next  time.Time
	after *retry.Pauses // the pauses after failed recoveries

	reclaimNext time.Time
	reclaims    *retry.Pauses // the pauses between reclaims
}

func newAlarmState() alarmState {
	return alarmState{after: retry.Policy{Min: recoveryGap, Max: recoveryMaxBackoff}.Pauses(),
		reclaims: retry.Policy{Min: reclaimMinBackoff, Max: reclaimMaxBackoff}.Pauses()}
}

// The quota guard counts etcd's file size, which deleting data (purged
// sessions, swept chunks, compacted history) does not shrink: freed pages
// are reused by etcd but only given back by defragmentation. A store whose
// file is near the limit would refuse appends (STORE_QUOTA_EXCEEDED) even
// after its data was deleted, until a person defragmented. So when the
// file nears the limit, the store compacts and defragments by itself,
// backing off while that frees nothing.
const (
	reclaimAt         = 0.9 // of the guard's limit
	reclaimGain       = 0.1 // a reclaim that frees less than this backs off
	reclaimMinBackoff = 10 * time.Minute
	reclaimMaxBackoff = 6 * time.Hour
)

// checkAlarms reads etcd's alarms and recovers from NOSPACE.
func (s *Store) checkAlarms(ctx context.Context) {
	resp, err := s.cli.AlarmList(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.lg.Warn("alarm list failed", zap.Error(err))
		}
		return
	}
	var nospace []*etcdserverpb.AlarmMember
	for _, a := range resp.Alarms {
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			nospace = append(nospace, a)
		}
	}
	if len(nospace) == 0 {
		s.m.NoSpaceAlarm.Set(0)
		s.alarm.after.Reset()
		s.maybeReclaim(ctx)
		return
	}
	s.m.NoSpaceAlarm.Set(1)
	if time.Now().Before(s.alarm.next) {
		return
	}
	s.lg.Warn("etcd raised NOSPACE: sweeping, compacting, defragmenting", zap.Int("members", len(nospace)))
	if err := s.recoverNoSpace(ctx, nospace); err != nil {
		wait := s.alarm.after.Next()
		s.alarm.next = time.Now().Add(wait)
		s.m.NoSpaceRecoveries.WithLabelValues("failed").Inc()
		s.lg.Error("NOSPACE recovery failed; writes stay refused", zap.Duration("retry_in", wait), zap.Error(err))
		return
	}
	s.alarm.after.Reset()
	s.alarm.next = time.Now().Add(recoveryGap)
	s.m.NoSpaceAlarm.Set(0)
	s.m.NoSpaceRecoveries.WithLabelValues("recovered").Inc()
	used, _ := s.Usage()
	s.lg.Warn("recovered from NOSPACE: alarm disarmed", zap.Int64("db_size_bytes", used))
}

// recoverNoSpace sweeps, compacts, defragments every member and disarms
// the alarms when the data then fits under the quota.
func (s *Store) recoverNoSpace(ctx context.Context, alarms []*etcdserverpb.AlarmMember) error {
	resp, err := s.cli.Get(ctx, s.key("health"), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("read revision: %w", err)
	}
	rev := resp.Header.Revision
	if before := s.sweep.watermark(time.Now(), rev, s.cfg.SweepGrace); before > 0 {
		if _, err := s.SweepChunks(ctx, before); err != nil {
			s.lg.Warn("chunk sweep under NOSPACE failed", zap.Error(err))
		}
	}
	largest, err := s.compactAndDefrag(ctx, rev)
	if err != nil {
		return err
	}
	// Disarming with the data still over the quota would only have etcd
	// raise the alarm again on the next write. Under it (even within the
	// reserve, where appends stay refused) heartbeats and registrations work.
	if largest >= s.cfg.QuotaBytes {
		return fmt.Errorf("%d bytes of live data after compaction and defragmentation, quota %d: delete sessions or raise the quota", largest, s.cfg.QuotaBytes)
	}
	for _, a := range alarms {
		if _, err := s.cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm}); err != nil {
			return fmt.Errorf("disarm member %x: %w", a.MemberID, err)
		}
	}
	return nil
}

// compactAndDefrag compacts to rev, defragments every member and returns
// the largest member's size after it.
func (s *Store) compactAndDefrag(ctx context.Context, rev int64) (int64, error) {
	if _, err := s.cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return 0, fmt.Errorf("compact to %d: %w", rev, err)
	}
	eps, err := s.memberEndpoints(ctx)
	if err != nil {
		return 0, err
	}
	var largest int64
	for _, ep := range eps {
		dctx, cancel := context.WithTimeout(ctx, defragTimeout)
		_, err := s.cli.Defragment(dctx, ep)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("defragment %s: %w", ep, err)
		}
		st, err := s.cli.Status(ctx, ep)
		if err != nil {
			return 0, fmt.Errorf("status of %s: %w", ep, err)
		}
		largest = max(largest, st.DbSize)
	}
	return largest, s.refreshQuota(ctx)
}

// maybeReclaim compacts and defragments when etcd's file nears the
// guard's limit (no alarm raised), at most once per backoff.
func (s *Store) maybeReclaim(ctx context.Context) {
	size := s.quota.dbSize.Load()
	if float64(size) < reclaimAt*float64(s.quota.limit) || time.Now().Before(s.alarm.reclaimNext) {
		return
	}
	resp, err := s.cli.Get(ctx, s.key("health"), clientv3.WithCountOnly())
	if err != nil {
		return
	}
	s.lg.Info("etcd's file is near the quota: compacting and defragmenting", zap.Int64("db_size_bytes", size))
	after, err := s.compactAndDefrag(ctx, resp.Header.Revision)
	gained := err == nil && float64(size-after) >= reclaimGain*float64(size)
	if gained {
		s.alarm.reclaims.Reset() // the next no sooner than reclaimMinBackoff
		s.m.Reclaims.WithLabelValues("freed").Inc()
	} else {
		s.m.Reclaims.WithLabelValues("nothing_freed").Inc()
	}
	wait := s.alarm.reclaims.Next()
	s.alarm.reclaimNext = time.Now().Add(wait)
	s.lg.Info("compaction and defragmentation done", zap.Int64("db_size_bytes", after), zap.Error(err),
		zap.Duration("next_no_sooner_than", wait))
}

// memberEndpoints is one client URL per cluster member (defragmentation
// is per member), or the client's endpoints when members cannot be listed.
func (s *Store) memberEndpoints(ctx context.Context) ([]string, error) {
	ml, err := s.cli.MemberList(ctx)
	if err != nil {
		if eps := s.cli.Endpoints(); len(eps) > 0 {
			return eps, nil
		}
		return nil, fmt.Errorf("list members: %w", err)
	}
	var eps []string
	for _, m := range ml.Members {
		if len(m.ClientURLs) > 0 {
			eps = append(eps, m.ClientURLs[0])
		}
	}
	if len(eps) == 0 {
		return s.cli.Endpoints(), nil
	}
	return eps, nil
}
