package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/archive"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/tick"
)

// Store is what the sweep needs of the store.
type Store interface {
	archive.Store
	fence.SessionLister
	// LastActive is when the session last changed or took a message.
	LastActive(ctx context.Context, sess *castv1.Session) (time.Time, error)
}

// Sweeper applies a policy to the store's sessions.
type Sweeper struct {
	st  Store
	cfg Config
	m   *metrics.Retention
	lg  *zap.Logger
	// page is how many session records one read takes (listPage; tests
	// take fewer to sweep several pages of a few sessions).
	page int
}

// New returns a sweeper of st under cfg (already validated).
func New(st Store, cfg Config, m *metrics.Retention, lg *zap.Logger) *Sweeper {
	return &Sweeper{st: st, cfg: cfg, m: m, lg: lg, page: listPage}
}

// errActive: the session changed between the sweep's read and its purge.
var errActive = errors.New("retention: session active again")

// listPage is how many session records one read takes.
const listPage = 500

// Run sweeps every cfg.Every until ctx ends. Every replica runs it: two
// purging one session at once are told apart by the purge's txn (the
// second finds it gone).
func (w *Sweeper) Run(ctx context.Context) {
	tick.Loop{Every: w.cfg.Every, First: true}.Run(ctx, func() bool {
		if _, err := w.SweepAt(ctx, time.Now()); err != nil && ctx.Err() == nil {
			w.lg.Warn("retention sweep failed; retried next round", zap.Error(err))
		}
		return true
	})
}

// SweepAt purges, as of now, every session a rule covers whose last
// activity is more than its rule's window before now, and returns how
// many it purged (in a dry run: would have purged, purging none). A
// session it cannot read or purge is counted in
// cast_retention_errors_total and left for the next sweep; the error
// returned joins them.
func (w *Sweeper) SweepAt(ctx context.Context, now time.Time) (int, error) {
	if !w.cfg.Policy.Enabled() {
		return 0, nil
	}
	byRule := map[string]int{}
	purged := 0
	var errAll error
	err := fence.EachSession(ctx, w.st, w.page, true, func(sess *castv1.Session) error {
		rule, ok, err := w.sweepOne(ctx, sess, now)
		if ok {
			purged++
			byRule[rule]++
		}
		if err != nil {
			w.m.Errors.Inc()
			errAll = errors.Join(errAll, fmt.Errorf("session %s: %w", sess.Id, err))
		}
		return nil // the next sweep tries it again
	})
	if err != nil {
		return purged, err
	}
	if w.cfg.DryRun { // the gauge is the whole sweep's: set once it read every session
		for _, r := range w.cfg.Policy.Rules {
			w.m.WouldPurge.WithLabelValues(r.Principal).Set(float64(byRule[r.Principal]))
		}
	}
	return purged, errAll
}

// sweepOne purges sess if its rule says so (in a dry run, reports it),
// and says whether it did and under which rule's principal.
func (w *Sweeper) sweepOne(ctx context.Context, sess *castv1.Session, now time.Time) (string, bool, error) {
	rule, ok := w.cfg.Policy.Match(sess.Creator)
	if !ok || rule.Keep || !expired(recordTime(sess), now, rule.Window) {
		return "", false, nil // the record alone shows it recent: no message read
	}
	last, err := w.st.LastActive(ctx, sess)
	if err != nil || !expired(last, now, rule.Window) {
		return "", false, err
	}
	if w.cfg.DryRun {
		if archive.Purgeable(sess) != nil {
			return "", false, nil // at work: the purge would leave it too
		}
		w.lg.Info("session would be purged by the retention policy (dry run: kept)", zap.String("session", sess.Id), zap.String("creator", sess.Creator),
			zap.String("rule", rule.String()), zap.Time("last_active", last), zap.Duration("idle", now.Sub(last).Round(time.Minute)))
		return rule.Principal, true, nil
	}
	err = archive.PurgeIf(ctx, w.st, sess.Id, func(cur *castv1.Session) error {
		if cur.LastSeq != sess.LastSeq || !recordTime(cur).Equal(recordTime(sess)) {
			return errActive
		}
		return nil
	})
	switch {
	case errors.Is(err, errActive), errs.HasReason(err, errs.ReasonSessionBusy), errs.HasReason(err, errs.ReasonSessionFenced):
		w.lg.Debug("retention left a session that is at work", zap.String("session", sess.Id), zap.Error(err))
		return "", false, nil
	case errs.HasReason(err, errs.ReasonNotFound):
		return "", false, nil // purged meanwhile (by a person or another replica)
	case err != nil:
		return "", false, err
	}
	w.m.Purged.WithLabelValues(rule.Principal).Inc()
	w.lg.Info("session purged by the retention policy", zap.String("session", sess.Id), zap.String("creator", sess.Creator),
		zap.String("rule", rule.String()), zap.Time("last_active", last), zap.Duration("idle", now.Sub(last).Round(time.Minute)))
	return rule.Principal, true, nil
}

// recordTime is when the session's record last changed.
func recordTime(sess *castv1.Session) time.Time {
	at := sess.GetCreateTime().AsTime()
	if u := sess.GetUpdateTime(); u != nil && u.AsTime().After(at) {
		at = u.AsTime()
	}
	return at
}

func expired(last, now time.Time, window time.Duration) bool {
	return now.Sub(last) > window
}
