// Package migrate moves live sessions between nodes: a migration is a
// resource in the store, and each of its sessions goes through fence,
// drain, work tree and commit steps that are each one etcd txn (or an
// idempotent relay), recorded as they complete. A control plane that
// restarts picks unfinished migrations up where the store says they are;
// a retried step after an unknown outcome finds its own earlier result.
// The package knows nothing of gRPC.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/tick"
)

// Store is what the manager needs from the store.
type Store interface {
	CreateMigration(ctx context.Context, m *castv1.Migration, reqKey string) (*fence.MigrationRecord, bool, error)
	MigrationForRequest(ctx context.Context, reqKey string) (*fence.MigrationRecord, bool, error)
	GetMigration(ctx context.Context, id string) (*fence.MigrationRecord, error)
	WaitCancelRequested(ctx context.Context, id string) error
	UpdateMigration(ctx context.Context, id string, fn func(*castv1.Migration) error) (*castv1.Migration, error)
	UpdateMigrationSession(ctx context.Context, migID string, ms *castv1.MigrationSession, rev int64) (int64, error)
	FenceSession(ctx context.Context, migID string, ms *castv1.MigrationSession, msRev int64, target string) (int64, int64, error)
	WaitTurn(ctx context.Context, sessionID string, fromRev int64, tick time.Duration, check func(*castv1.Session) (bool, error)) (*castv1.Session, bool, error)
	CommitHandover(ctx context.Context, h fence.Handover) (int64, error)
	Unfence(ctx context.Context, migID string, ms *castv1.MigrationSession, msRev int64) (int64, error)
	GetSession(ctx context.Context, id string) (*castv1.Session, error)
	Owner(ctx context.Context, id string) (string, int64, error)
	fence.SessionLister
	SessionsOwnedBy(ctx context.Context, node string) ([]fence.OwnedSession, error)
	ListNodes(ctx context.Context) ([]*castv1.Node, error)
	NodeConnected(ctx context.Context, node string) (bool, error)
	RequestOp(ctx context.Context, sessionID, op string) error
	SendNodeCommand(ctx context.Context, node string, cmd *castv1.Command) error
	WorkTreeRecord(ctx context.Context, migID, sessionID, name string) (string, bool, error)
	DeleteWorkTree(ctx context.Context, migID, sessionID string) error
	RunnerLease(ctx context.Context, ttl time.Duration) (fence.Lease, <-chan struct{}, error)
	ClaimMigration(ctx context.Context, id string, l fence.Lease) (bool, error)
	ReleaseMigration(ctx context.Context, id string, l fence.Lease) error
	UnrunMigrations(ctx context.Context) ([]*castv1.Migration, error)
}

// Config tunes the manager.
type Config struct {
	DefaultWait        time.Duration // how long an in-flight turn may run before it is interrupted
	MaxWait            time.Duration
	DefaultMaxParallel int
	MaxParallel        int
	Tick               time.Duration // poll interval of waits
	StopGrace          time.Duration // after an interrupt, how long the turn may take to stop
	WorkTreeTimeout    time.Duration // bound on each of export and import
	ResendEvery        time.Duration // a relayed command not answered by then is sent again
	// SourceGrace is how long a source must stay disconnected before its
	// in-flight turn is no longer waited for: the node lease (a node stops
	// its agents by itself after ¾ of it without the control plane). Its
	// connection key goes at once when its stream drops (the replica
	// revokes the lease), and a blip leaves the agent running.
	SourceGrace time.Duration
	// RunnerTTL is the lease under which this replica holds the
	// migrations it runs; a replica that dies loses them after it, and
	// another adopts them (looking every AdoptEvery).
	RunnerTTL  time.Duration
	AdoptEvery time.Duration
	// Failpoint, when set, is called at each phase boundary with its name
	// (fault tests kill the process there).
	Failpoint func(name string)
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		DefaultWait: 10 * time.Minute, MaxWait: 24 * time.Hour,
		DefaultMaxParallel: 4, MaxParallel: 64,
		Tick: 200 * time.Millisecond, StopGrace: 30 * time.Second,
		WorkTreeTimeout: 5 * time.Minute, ResendEvery: 5 * time.Second, SourceGrace: 10 * time.Second,
		RunnerTTL: 5 * time.Second, AdoptEvery: time.Second,
	}
}

// Validate checks c.
func (c Config) Validate() error {
	switch {
	case c.DefaultWait <= 0 || c.MaxWait < c.DefaultWait:
		return errors.New("migrate: wait bounds must be positive and max >= default")
	case c.DefaultMaxParallel < 1 || c.MaxParallel < c.DefaultMaxParallel:
		return errors.New("migrate: parallelism must be >= 1 and max >= default")
	case c.Tick <= 0 || c.StopGrace <= 0 || c.WorkTreeTimeout <= 0 || c.ResendEvery <= 0 || c.SourceGrace <= 0:
		return errors.New("migrate: tick, stop grace, work tree timeout, resend interval and source grace must be positive")
	case c.RunnerTTL < time.Second || c.AdoptEvery <= 0:
		return errors.New("migrate: the runner lease must be at least 1s and the adopt interval positive")
	}
	return nil
}

// Manager runs migrations.
type Manager struct {
	st  Store
	cfg Config
	lg  *zap.Logger
	m   *metrics.Migration

	// divert, when set, hands off a session the destination cannot take
	// over instead of moving it (SetDiverter).
	divert Diverter

	mu      sync.Mutex
	ctx     context.Context // migrations live as long as it
	running map[string]chan struct{}
	wg      sync.WaitGroup
	// lease holds this replica's runner claims (0: none yet; claims wait
	// for Run to take one).
	lease fence.Lease
}

// New returns a Manager whose migrations run until ctx ends; Run resumes
// unfinished ones.
func New(ctx context.Context, st Store, cfg Config, m *metrics.Migration, lg *zap.Logger) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if m == nil {
		m = metrics.NewMigration(nil)
	}
	return &Manager{st: st, cfg: cfg, lg: lg.Named("migrate"), m: m, ctx: ctx, running: map[string]chan struct{}{}}, nil
}

// Diverter turns the move of a session with history into a handoff on the
// destination when the destination's version of the session's agent failed
// its conformance canary; to is "" when the session may move.
type Diverter interface {
	Divert(ctx context.Context, sess *castv1.Session, node string) (to, why string, err error)
}

// SetDiverter sets d before the manager serves any migration.
func (mg *Manager) SetDiverter(d Diverter) { mg.divert = d }

// Run takes this replica's runner lease, then, every AdoptEvery, resumes
// the unfinished migrations no live replica runs (those of a replica that
// died, and all of them after a restart), until ctx ends; then it waits for
// the running ones to stop (another replica, or the next start, resumes
// them).
func (mg *Manager) Run(ctx context.Context) {
	defer mg.wg.Wait()
	for ctx.Err() == nil {
		l, lost, err := mg.st.RunnerLease(ctx, mg.cfg.RunnerTTL)
		if err != nil {
			if ctx.Err() != nil {
				return // stopping: not a failure
			}
			mg.lg.Warn("migration runner lease failed; trying again", zap.Error(err))
			if !tick.Sleep(ctx, mg.cfg.AdoptEvery) {
				return
			}
			continue
		}
		mg.mu.Lock()
		mg.lease = l
		mg.mu.Unlock()
		mg.adoptUntil(ctx, lost)
	}
}

// adoptUntil claims and runs orphaned migrations until ctx ends or the
// lease is lost.
func (mg *Manager) adoptUntil(ctx context.Context, lost <-chan struct{}) {
	tick.Loop{Every: mg.cfg.AdoptEvery, First: true, Stop: lost}.Run(ctx, func() bool {
		list, err := mg.st.UnrunMigrations(ctx)
		if err != nil {
			mg.lg.Debug("list migrations to adopt failed", zap.Error(err))
		}
		for _, m := range list {
			if !Terminal(m.State) {
				mg.launch(m.Id, true)
			}
		}
		return true
	})
	if ctx.Err() == nil { // only the lease's loss ends the loop early
		mg.lg.Warn("migration runner lease lost; taking a new one")
	}
}

// launch runs migration id in the background unless it already runs here.
// With claim, only once this replica holds the migration's runner key (no
// other live replica runs it); without, at once (a cancel rolls back
// wherever it is asked: steps are CAS-guarded).
func (mg *Manager) launch(id string, claim bool) {
	mg.mu.Lock()
	_, running := mg.running[id]
	l := mg.lease
	mg.mu.Unlock()
	if running || mg.ctx.Err() != nil {
		return
	}
	if claim {
		if l == 0 {
			return // Run adopts it once it holds a lease
		}
		ok, err := mg.st.ClaimMigration(mg.ctx, id, l)
		if err != nil || !ok {
			return // another replica runs it, or etcd is away: the next round looks again
		}
	}
	mg.mu.Lock()
	defer mg.mu.Unlock()
	if _, ok := mg.running[id]; ok || mg.ctx.Err() != nil {
		return
	}
	cancel := make(chan struct{})
	mg.running[id] = cancel
	mg.wg.Add(1)
	mg.m.Active.Inc()
	go func() {
		defer mg.wg.Done()
		defer mg.m.Active.Dec()
		if claim {
			mg.lg.Info("running migration", zap.String("migration", id))
			defer mg.release(id, l)
		}
		mg.run(mg.ctx, id, cancel)
		mg.mu.Lock()
		delete(mg.running, id)
		mg.mu.Unlock()
	}()
}

// claimNew claims id for this replica before the migration is created;
// 0 when it could not (no lease yet, etcd away): Run adopts it then.
func (mg *Manager) claimNew(ctx context.Context, id string) fence.Lease {
	mg.mu.Lock()
	l := mg.lease
	mg.mu.Unlock()
	if l == 0 {
		return 0
	}
	if ok, err := mg.st.ClaimMigration(ctx, id, l); err != nil || !ok {
		return 0
	}
	return l
}

// release gives the claim up once the run ended (finished, or this
// replica stopping: another resumes it at once instead of after the TTL).
func (mg *Manager) release(id string, l fence.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := mg.st.ReleaseMigration(ctx, id, l); err != nil {
		mg.lg.Debug("release migration claim failed (it lapses with the lease)", zap.String("migration", id), zap.Error(err))
	}
}

// Get returns a migration with per-session progress.
func (mg *Manager) Get(ctx context.Context, id string) (*castv1.Migration, error) {
	rec, err := mg.st.GetMigration(ctx, id)
	if err != nil {
		return nil, err
	}
	return rec.M, nil
}

// Cancel rolls back every session of the migration that has not reached
// its commit. Cancelling a finished migration is FAILED_PRECONDITION.
func (mg *Manager) Cancel(ctx context.Context, id string) (*castv1.Migration, error) {
	_, err := mg.st.UpdateMigration(ctx, id, func(m *castv1.Migration) error {
		if Terminal(m.State) {
			return errs.New(errs.KindFailedPrecondition, errs.ReasonMigrationDone,
				"migration %s already ended (%s); nothing to cancel", id, StateName(m.State))
		}
		m.CancelRequested = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	mg.stop(id)
	// A migration whose runner lives on another replica (or on none after
	// a restart) is rolled back by a runner here; steps are CAS-guarded, so
	// two runners cannot both win one.
	mg.launch(id, false)
	return mg.Get(ctx, id)
}

// stop tells migration id's jobs running here that it was cancelled:
// their waits end at once.
func (mg *Manager) stop(id string) {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	if ch, ok := mg.running[id]; ok {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
}

// watchCancel stops migration id's jobs here once a cancel is recorded:
// one asked on another replica closes no channel of this one, and a drain
// waiting here would otherwise interrupt, when its --wait ran out, the turn
// of a session that replica had already rolled back. It watches the
// header (no read every tick for each migration running); a watch etcd
// keeps refusing is looked at again a tick later.
func (mg *Manager) watchCancel(ctx context.Context, id string) {
	for {
		err := mg.st.WaitCancelRequested(ctx, id)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			mg.stop(id)
			return
		case errs.HasReason(err, errs.ReasonNotFound):
			return // its record is gone: nothing left to cancel
		}
		mg.lg.Warn("watch for a cancel of the migration failed; watching again", zap.String("migration", id), zap.Error(err))
		if !tick.Sleep(ctx, mg.cfg.Tick) {
			return
		}
	}
}

// run moves the migration's sessions, at most max_parallel at once.
func (mg *Manager) run(ctx context.Context, id string, cancel <-chan struct{}) {
	rec, err := mg.st.GetMigration(ctx, id)
	if err != nil {
		mg.lg.Warn("read migration failed", zap.String("migration", id), zap.Error(err))
		return
	}
	par := int(rec.M.MaxParallel)
	if par < 1 {
		par = mg.cfg.DefaultMaxParallel
	}
	wait := rec.M.Wait.AsDuration()
	if rec.M.Wait == nil || wait <= 0 {
		wait = mg.cfg.DefaultWait
	}
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		mg.watchCancel(wctx, id)
	}()
	defer func() { stopWatch(); <-watched }()
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for _, ms := range rec.M.Sessions {
		if Terminal(ms.State) {
			continue
		}
		wg.Add(1)
		go func(sid string) {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			j := &job{mg: mg, migID: id, sid: sid, target: rec.M.TargetNode, wait: wait, skipWT: rec.M.SkipWorktree, cleanSource: rec.M.CleanSource, cancel: cancel}
			if err := j.run(ctx); err != nil && ctx.Err() == nil {
				mg.lg.Warn("session migration step failed", zap.String("migration", id), zap.String("session", sid), zap.Error(err))
			}
		}(ms.SessionId)
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // shutting down: the next start resumes
	}
	mg.finish(ctx, id)
}

// finish sets the header's final state from its sessions'.
func (mg *Manager) finish(ctx context.Context, id string) {
	rec, err := mg.st.GetMigration(ctx, id)
	if err != nil {
		return
	}
	failed, cancelled, handedOff := 0, 0, 0
	for _, ms := range rec.M.Sessions {
		switch ms.State {
		case castv1.MigrationState_MIGRATION_STATE_HANDED_OFF:
			handedOff++
		case castv1.MigrationState_MIGRATION_STATE_FAILED:
			failed++
		case castv1.MigrationState_MIGRATION_STATE_CANCELLED:
			cancelled++
		case castv1.MigrationState_MIGRATION_STATE_SUCCEEDED:
		default:
			return // not done (another runner holds it)
		}
	}
	_, err = mg.st.UpdateMigration(ctx, id, func(m *castv1.Migration) error {
		switch {
		case cancelled > 0 && m.CancelRequested:
			m.State, m.Reason = castv1.MigrationState_MIGRATION_STATE_CANCELLED, fmt.Sprintf("cancelled by request; %d of %d sessions rolled back", cancelled, len(rec.M.Sessions))
		case failed > 0:
			m.State, m.Reason = castv1.MigrationState_MIGRATION_STATE_FAILED, fmt.Sprintf("%d of %d sessions failed to move", failed, len(rec.M.Sessions))
		case cancelled > 0:
			m.State = castv1.MigrationState_MIGRATION_STATE_CANCELLED
		default:
			m.State = castv1.MigrationState_MIGRATION_STATE_SUCCEEDED
			if handedOff > 0 {
				m.Reason = fmt.Sprintf("%d of %d sessions handed off on the destination instead of moved (see each session's reason)", handedOff, len(rec.M.Sessions))
			}
		}
		return nil
	})
	if err != nil {
		mg.lg.Warn("record migration outcome failed", zap.String("migration", id), zap.Error(err))
		return
	}
	mg.lg.Info("migration finished", zap.String("migration", id), zap.Int("failed", failed), zap.Int("cancelled", cancelled))
}

func (mg *Manager) failpoint(name string) {
	if mg.cfg.Failpoint != nil {
		mg.cfg.Failpoint(name)
	}
}

// Terminal reports whether a migration (or one session's move) has ended.
func Terminal(s castv1.MigrationState) bool {
	return s == castv1.MigrationState_MIGRATION_STATE_SUCCEEDED || s == castv1.MigrationState_MIGRATION_STATE_FAILED ||
		s == castv1.MigrationState_MIGRATION_STATE_CANCELLED || s == castv1.MigrationState_MIGRATION_STATE_HANDED_OFF
}

// StateName is the lower-case name people see ("draining_turn").
func StateName(s castv1.MigrationState) string {
	name, ok := castv1.MigrationState_name[int32(s)]
	if !ok {
		return "unknown"
	}
	out := []byte(name[len("MIGRATION_STATE_"):])
	for i, c := range out {
		if c >= 'A' && c <= 'Z' {
			out[i] = c + 'a' - 'A'
		}
	}
	return string(out)
}

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }
