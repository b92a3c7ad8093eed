package catrust

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/secrets"
)

// Store is what the trust needs of the store: the one CA record, changed
// only by compare-and-swap, and the certificates issued.
type Store interface {
	GetCA(ctx context.Context) (Record, bool, error)
	ReplaceCA(ctx context.Context, old, next Record) error
	CertIssues(ctx context.Context, now time.Time) ([]CertIssue, error)
}

// Config is how a replica loads and keeps its trust.
type Config struct {
	// OpCA is the operator's CA this replica was given (--ca-cert,
	// --ca-key), nil when none.
	OpCA *pki.CA
	// Box opens the secrets key that seals the CA keys (nil, nil: no key).
	Box func() (*secrets.Box, error)
	// CAFile, when set, is written with the bundle on every change: the
	// clients of this host (the dev context) trust it.
	CAFile string
	// CATTL is the lifetime of a CA a rotation makes here.
	CATTL time.Duration
	// OnChange hears of each set this replica takes (ending calls made
	// with certificates a set no longer trusts).
	OnChange func(*Set)
}

// Manager is one replica's trust: the set it signs and verifies with,
// reloaded from the store's record, and the rotation's steps.
type Manager struct {
	st    Store
	cfg   Config
	lg    *zap.Logger
	state atomic.Pointer[Set]
	// applyMu orders Apply's compare, swap and file write, so a reload
	// racing a step never writes an older bundle last.
	applyMu sync.Mutex
}

// New returns a Manager with no set yet (Apply gives it one).
func New(st Store, cfg Config, lg *zap.Logger) *Manager {
	if cfg.OnChange == nil {
		cfg.OnChange = func(*Set) {}
	}
	return &Manager{st: st, cfg: cfg, lg: lg}
}

// Current is the replica's set (nil before the first Apply).
func (m *Manager) Current() *Set { return m.state.Load() }

// SetFrom builds the set of rec.
func (m *Manager) SetFrom(rec Record) (*Set, error) {
	signer, err := m.signerOf(rec)
	if err != nil {
		return nil, err
	}
	return newSet(signer, rec)
}

// signerOf loads the CA that signs in rec: the operator's this replica
// was given, or the store's sealed one.
func (m *Manager) signerOf(rec Record) (*pki.CA, error) {
	if rec.Operator {
		if m.cfg.OpCA == nil || pki.Pin(m.cfg.OpCA.Cert) != StoredPin(rec) {
			return nil, fmt.Errorf("this store's TLS CA is an operator's (pin %s): give this replica the same --ca-cert and --ca-key as the others", StoredPin(rec))
		}
		return m.cfg.OpCA, nil
	}
	box, err := m.cfg.Box()
	if err != nil {
		return nil, err
	}
	if box == nil {
		return nil, errors.New("the TLS CA key is sealed in the store: give --secrets-key-file (or an operator CA: --ca-cert, --ca-key)")
	}
	keyDER, err := box.Open(rec.SealedKey, KeyAAD)
	if err != nil {
		return nil, fmt.Errorf("the TLS CA key: %w (is this the secrets key the CA was sealed with?)", err)
	}
	return pki.LoadCA(rec.CertPEM, keyDER)
}

// Apply makes rec the replica's set when it is newer than the current
// one, and writes the bundle to the CA file.
func (m *Manager) Apply(rec Record) error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	prev := m.Current()
	if prev != nil && prev.Rec.Rev >= rec.Rev {
		return nil
	}
	set, err := m.SetFrom(rec)
	if err != nil {
		return err
	}
	// TrustOnly may have swapped in the meantime; it never raises the
	// revision, so what it left is replaced by this newer record.
	prev = m.state.Swap(set)
	if m.cfg.CAFile != "" {
		if err := fsutil.WriteFileAtomic(m.cfg.CAFile, set.Bundle, 0o644); err != nil && !errors.Is(err, os.ErrExist) {
			if prev == nil {
				return fmt.Errorf("write %s: %w", m.cfg.CAFile, err)
			}
			m.lg.Warn("tls CA bundle not written", zap.String("ca_file", m.cfg.CAFile), zap.Error(err))
		}
	}
	if prev != nil && (prev.Hash != set.Hash || prev.Signer != set.Signer) {
		m.lg.Info("tls CAs reloaded", zap.String("signing_pin", pki.Pin(set.Signer.Cert)), zap.Int("trusted", len(set.Trusted)), zap.String("bundle", set.Hash))
	}
	m.cfg.OnChange(set)
	return nil
}

// Reload reads the store's record and applies it, or only its trust when
// this replica cannot load it.
func (m *Manager) Reload(ctx context.Context) {
	rec, ok, err := m.st.GetCA(ctx)
	if err == nil && ok {
		if err = m.Apply(rec); err != nil {
			m.TrustOnly(rec)
		}
	}
	if err != nil && ctx.Err() == nil {
		m.lg.Warn("tls CA reload failed", zap.Error(err))
	}
}

// TrustOnly takes rec's trust when this replica cannot load rec itself
// (its signing CA's key is sealed with a secrets key this replica lacks,
// say): it keeps signing with what it had, but trusts and names the CAs
// the replicas that followed do, so it never accepts a certificate from
// a CA the store retired. Its current revision stays, so the next reload
// tries rec again.
func (m *Manager) TrustOnly(rec Record) {
	cur := m.Current()
	if cur == nil || cur.Rec.Rev >= rec.Rev {
		return
	}
	set := &Set{Signer: cur.Signer, Rec: cur.Rec}
	set.Rec.Retired = rec.Retired
	for _, p := range append([][]byte{rec.CertPEM}, othersPEM(rec)...) {
		c, err := pki.ParseCert(p)
		if err != nil {
			return
		}
		set.Trusted = append(set.Trusted, c)
	}
	set.Retired = retiredCerts(rec)
	set.seal()
	if set.Hash == cur.Hash && len(set.Retired) == len(cur.Retired) {
		return
	}
	if m.state.CompareAndSwap(cur, set) {
		m.cfg.OnChange(set)
		m.lg.Warn("tls CA record not loadable here: trusting the store's CAs, signing with the CA this replica had",
			zap.String("signing_pin", pki.Pin(set.Signer.Cert)), zap.Bool("signer_trusted", set.Signs()), zap.String("bundle", set.Hash))
	}
}

// step reads the record, lets change edit it (or refuse), stores it by
// compare-and-swap and applies it here at once.
func (m *Manager) step(ctx context.Context, change func(rec *Record) error) (Record, error) {
	if m.Current() == nil {
		return Record{}, errs.New(errs.KindFailedPrecondition, errs.ReasonCAState, "this control plane serves plaintext (--insecure): it has no CA to rotate")
	}
	old, ok, err := m.st.GetCA(ctx)
	if err != nil {
		return old, err
	}
	if !ok {
		return old, errs.Internal(errors.New("no CA record"), "ca")
	}
	rec := old
	rec.Others = append([]OtherCA(nil), old.Others...)
	rec.Retired = append([]RetiredCA(nil), old.Retired...)
	if err := change(&rec); err != nil {
		return old, err
	}
	if err := m.st.ReplaceCA(ctx, old, rec); err != nil {
		return old, err
	}
	if rec, _, err = m.st.GetCA(ctx); err != nil {
		return rec, err
	}
	if err := m.Apply(rec); err != nil {
		m.TrustOnly(rec)
		return rec, errs.New(errs.KindFailedPrecondition, errs.ReasonCANotLoadable,
			"the step is stored and the other replicas follow it, but this replica cannot load the CA record (%v): it signs with its old CA; fix its flags and restart it", err)
	}
	return rec, nil
}
