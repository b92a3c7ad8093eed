package controlplane

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/tick"
)

// CA rotation with an overlap (kubeadm/Consul/Vault style), in three
// admin steps, each a compare-and-swap of the store's CA record that
// every replica reloads (reloadCAs) without a restart:
//
//  1. rotate: a new CA (made here, or an operator's) is trusted beside the
//     signing one, which still signs. Clients learn the bundle {old, new}:
//     nodes at their next renewal, the CLI on its next call (every reply
//     names the bundle in a header; the client fetches it over the
//     connection it already verified).
//  2. activate: the new CA signs the server certificate, renewals and new
//     certificates; the old one's certificates still work.
//  3. retire: the old CA is trusted no more; its certificates are refused
//     (CERT_UNTRUSTED, saying it was retired).
//
// activate is refused while a node with a live certificate has not
// renewed since step 1 (it does not trust the new CA yet), and retire
// while a principal's latest live certificate is from the old CA, both
// naming them, unless forced.

// maxRetiredCAs bounds the retired CAs a refusal can name.
const maxRetiredCAs = 4

// caSet is what a replica trusts and signs with, built from one revision
// of the store's CA record.
type caSet struct {
	signer  *pki.CA
	trusted []*x509.Certificate // the signer first
	bundle  []byte              // trusted, PEM
	hash    string              // pki.BundleHash(trusted)
	retired []*x509.Certificate // no longer trusted (refusals name them)
	rec     store.CARecord
}

// caSetFrom builds the set of rec.
func (s *Server) caSetFrom(rec store.CARecord) (*caSet, error) {
	signer, err := s.signerOf(rec)
	if err != nil {
		return nil, err
	}
	set := &caSet{signer: signer, trusted: []*x509.Certificate{signer.Cert}, rec: rec}
	for _, o := range rec.Others {
		c, err := pki.ParseCert(o.CertPEM)
		if err != nil {
			return nil, fmt.Errorf("the %s CA of the rotation: %w", o.State, err)
		}
		set.trusted = append(set.trusted, c)
	}
	for _, r := range rec.Retired {
		if c, err := pki.ParseCert(r.CertPEM); err == nil {
			set.retired = append(set.retired, c)
		}
	}
	set.bundle, set.hash = pki.BundlePEM(set.trusted), pki.BundleHash(set.trusted)
	return set, nil
}

// signerOf loads the CA that signs in rec: the operator's this replica
// was given, or the store's sealed one.
func (s *Server) signerOf(rec store.CARecord) (*pki.CA, error) {
	if rec.Operator {
		if s.opCA == nil || pki.Pin(s.opCA.Cert) != storedPin(rec) {
			return nil, fmt.Errorf("this store's TLS CA is an operator's (pin %s): give this replica the same --ca-cert and --ca-key as the others", storedPin(rec))
		}
		return s.opCA, nil
	}
	return s.openSealedCA(rec.CertPEM, rec.SealedKey)
}

func (s *Server) openSealedCA(certPEM, sealed []byte) (*pki.CA, error) {
	box, err := s.openBox()
	if err != nil {
		return nil, err
	}
	if box == nil {
		return nil, errors.New("the TLS CA key is sealed in the store: give --secrets-key-file (or an operator CA: --ca-cert, --ca-key)")
	}
	keyDER, err := box.Open(sealed, caAAD)
	if err != nil {
		return nil, fmt.Errorf("the TLS CA key: %w (is this the secrets key the CA was sealed with?)", err)
	}
	return pki.LoadCA(certPEM, keyDER)
}

// cas is the replica's current set (nil without TLS).
func (s *Server) cas() *caSet { return s.caState.Load() }

// signingCA is the CA that signs now (the server certificate's issuer).
func (s *Server) signingCA() *pki.CA {
	if set := s.cas(); set != nil {
		return set.signer
	}
	return nil
}

// applyCA makes rec the replica's set when it is newer than the current
// one, and writes the bundle to the data dir's CA file.
func (s *Server) applyCA(rec store.CARecord) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	prev := s.cas()
	if prev != nil && prev.rec.Rev >= rec.Rev {
		return nil
	}
	set, err := s.caSetFrom(rec)
	if err != nil {
		return err
	}
	// trustOnly may have swapped in the meantime; it never raises the
	// revision, so what it left is replaced by this newer record.
	prev = s.caState.Swap(set)
	if s.caFile != "" {
		// Clients of this host (the dev context) trust this file.
		if err := fsutil.WriteFileAtomic(s.caFile, set.bundle, 0o644); err != nil && !errors.Is(err, os.ErrExist) {
			if prev == nil {
				return fmt.Errorf("write %s: %w", s.caFile, err)
			}
			s.lg.Warn("tls CA bundle not written", zap.String("ca_file", s.caFile), zap.Error(err))
		}
	}
	if prev != nil && prev.hash != set.hash || prev != nil && prev.signer != set.signer {
		s.lg.Info("tls CAs reloaded", zap.String("signing_pin", pki.Pin(set.signer.Cert)), zap.Int("trusted", len(set.trusted)), zap.String("bundle", set.hash))
	}
	s.endUntrustedCalls(set)
	return nil
}

// reloadCAs follows the store's CA record, so a rotation step on any
// replica reaches this one at once (store.WatchCA), and within every when
// that watch is down.
func (s *Server) reloadCAs(every time.Duration) func(context.Context) {
	return func(ctx context.Context) {
		changed := make(chan struct{}, 1)
		if !s.cfg.TLS.NoCAWatch {
			s.goLoop(func(ctx context.Context) {
				s.store.WatchCA(ctx, func() {
					select {
					case changed <- struct{}{}:
					default: // a reload is pending: it reads the latest record
					}
				})
			})
		}
		tick.Loop{Every: every, Wake: changed}.Run(ctx, func() bool {
			s.reloadCA(ctx)
			return true
		})
	}
}

// reloadCA reads the store's CA record and applies it, or only its trust
// when this replica cannot load it.
func (s *Server) reloadCA(ctx context.Context) {
	rec, ok, err := s.store.GetCA(ctx)
	if err == nil && ok {
		if err = s.applyCA(rec); err != nil {
			s.trustOnly(rec)
		}
	}
	if err != nil && ctx.Err() == nil {
		s.lg.Warn("tls CA reload failed", zap.Error(err))
	}
}

// trustOnly takes rec's trust when this replica cannot load rec itself
// (its signing CA's key is sealed with a secrets key this replica lacks,
// say): it keeps signing with what it had, but trusts and names the CAs
// the replicas that followed do, so it never accepts a certificate from
// a CA the store retired. Its current revision stays, so the next reload
// tries rec again.
func (s *Server) trustOnly(rec store.CARecord) {
	cur := s.cas()
	if cur == nil || cur.rec.Rev >= rec.Rev {
		return
	}
	set := &caSet{signer: cur.signer, rec: cur.rec}
	set.rec.Retired = rec.Retired
	for _, p := range append([][]byte{rec.CertPEM}, othersPEM(rec)...) {
		c, err := pki.ParseCert(p)
		if err != nil {
			return
		}
		set.trusted = append(set.trusted, c)
	}
	for _, r := range rec.Retired {
		if c, err := pki.ParseCert(r.CertPEM); err == nil {
			set.retired = append(set.retired, c)
		}
	}
	set.bundle, set.hash = pki.BundlePEM(set.trusted), pki.BundleHash(set.trusted)
	if set.hash == cur.hash && len(set.retired) == len(cur.retired) {
		return
	}
	if s.caState.CompareAndSwap(cur, set) {
		s.endUntrustedCalls(set)
		s.lg.Warn("tls CA record not loadable here: trusting the store's CAs, signing with the CA this replica had",
			zap.String("signing_pin", pki.Pin(set.signer.Cert)), zap.Bool("signer_trusted", set.signs()), zap.String("bundle", set.hash))
	}
}

func othersPEM(rec store.CARecord) [][]byte {
	out := make([][]byte, 0, len(rec.Others))
	for _, o := range rec.Others {
		out = append(out, o.CertPEM)
	}
	return out
}

// signs reports whether the set's signer is one it trusts (not so on a
// replica that could not move away from a signer the store retired).
func (set *caSet) signs() bool {
	return slices.ContainsFunc(set.trusted, func(c *x509.Certificate) bool { return c.Equal(set.signer.Cert) })
}

// caStep reads the record, lets change edit it (or refuse), stores it by
// compare-and-swap and applies it here at once.
func (s *Server) caStep(ctx context.Context, change func(rec *store.CARecord) error) (store.CARecord, error) {
	if s.cas() == nil {
		return store.CARecord{}, errs.New(errs.KindFailedPrecondition, errs.ReasonCAState, "this control plane serves plaintext (--insecure): it has no CA to rotate")
	}
	old, ok, err := s.store.GetCA(ctx)
	if err != nil {
		return old, err
	}
	if !ok {
		return old, errs.Internal(errors.New("no CA record"), "ca")
	}
	rec := old
	rec.Others = append([]store.OtherCA(nil), old.Others...)
	rec.Retired = append([]store.RetiredCA(nil), old.Retired...)
	if err := change(&rec); err != nil {
		return old, err
	}
	if err := s.store.ReplaceCA(ctx, old, rec); err != nil {
		return old, err
	}
	if rec, _, err = s.store.GetCA(ctx); err != nil {
		return rec, err
	}
	if err := s.applyCA(rec); err != nil {
		s.trustOnly(rec)
		return rec, errs.New(errs.KindFailedPrecondition, errs.ReasonCANotLoadable,
			"the step is stored and the other replicas follow it, but this replica cannot load the CA record (%v): it signs with its old CA; fix its flags and restart it", err)
	}
	return rec, nil
}

// rotateCA is step 1: next is made here (certPEM and keyPEM empty) or an
// operator's, its key sealed with the secrets key.
func (s *Server) rotateCA(ctx context.Context, certPEM, keyPEM []byte) (store.CARecord, error) {
	next, err := s.nextCA(certPEM, keyPEM)
	if err != nil {
		return store.CARecord{}, err
	}
	box, err := s.openBox()
	if err != nil {
		return store.CARecord{}, err
	}
	if box == nil {
		return store.CARecord{}, errs.New(errs.KindFailedPrecondition, errs.ReasonNoSecretsKey,
			"a rotated CA's key is kept sealed in the store: start the control plane with --secrets-key-file")
	}
	keyDER, err := next.KeyDER()
	if err != nil {
		return store.CARecord{}, errs.Internal(err, "encode CA key")
	}
	sealed, err := box.Seal(keyDER, caAAD)
	if err != nil {
		return store.CARecord{}, err
	}
	return s.caStep(ctx, func(rec *store.CARecord) error {
		if len(rec.Others) > 0 {
			return errs.New(errs.KindFailedPrecondition, errs.ReasonCAState,
				"a CA rotation is under way (%s CA %s): finish it first (`cast ca status`, then `cast ca activate` or `cast ca retire`)", rec.Others[0].State, storedPin(store.CARecord{CertPEM: rec.Others[0].CertPEM}))
		}
		if pki.Pin(next.Cert) == storedPin(*rec) {
			return errs.Invalid("the new CA has the signing CA's key: a rotation needs a new key")
		}
		rec.Others = []store.OtherCA{{CertPEM: next.CertPEM, SealedKey: sealed, State: store.CANext, Since: time.Now().UTC()}}
		return nil
	})
}

// nextCA is the CA a rotation moves to.
func (s *Server) nextCA(certPEM, keyPEM []byte) (*pki.CA, error) {
	if len(certPEM) == 0 && len(keyPEM) == 0 {
		c, k, err := pki.NewCA(DefaultCATTL)
		if err != nil {
			return nil, err
		}
		return pki.LoadCA(c, k)
	}
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, errs.Invalid("an operator's new CA needs both its certificate and its key")
	}
	ca, err := pki.OperatorCA(certPEM, keyPEM, time.Now())
	if err != nil {
		return nil, errs.Invalid("the new CA: %v", err)
	}
	return ca, nil
}

// activateCA is step 2: the next CA signs; the signing one becomes old
// (trusted, keyless: it never signs again).
func (s *Server) activateCA(ctx context.Context, force bool) (store.CARecord, error) {
	return s.caStep(ctx, func(rec *store.CARecord) error {
		next, ok := rec.Other(store.CANext)
		if !ok {
			return errs.New(errs.KindFailedPrecondition, errs.ReasonCAState, "no new CA to activate: start a rotation with `cast ca rotate`")
		}
		if !force {
			if err := s.noneBehind(ctx, storedPin(store.CARecord{CertPEM: next.CertPEM}), next.Since); err != nil {
				return err
			}
		}
		old := store.OtherCA{CertPEM: rec.CertPEM, State: store.CAOld, Since: time.Now().UTC()}
		rec.CertPEM, rec.SealedKey, rec.Operator = next.CertPEM, next.SealedKey, false
		rec.Others = []store.OtherCA{old}
		return nil
	})
}

// noneBehind refuses while a node holding a live certificate was not
// handed the new CA (of pin) with its latest one: it has not learnt it,
// and would not trust the server's next certificate. A renewal after the
// rotation began on a replica that had not reloaded it yet does not
// count; a record from before issues named their bundle goes by since.
func (s *Server) noneBehind(ctx context.Context, pin string, since time.Time) error {
	issues, err := s.store.CertIssues(ctx, time.Now())
	if err != nil {
		return err
	}
	var behind []string
	for _, c := range latestByCred(issues) {
		learnt := !c.Issued.Before(since)
		if c.Trusts != nil {
			learnt = slices.Contains(c.Trusts, pin)
		}
		if c.Role == "node" && !learnt {
			behind = append(behind, fmt.Sprintf("%s (renews by %s)", c.Name, pki.RenewAt(&x509.Certificate{NotBefore: c.Issued.Add(-pki.ClientSkew), NotAfter: c.Expires}).UTC().Format(time.RFC3339)))
		}
	}
	if len(behind) == 0 {
		return nil
	}
	sort.Strings(behind)
	return errs.New(errs.KindFailedPrecondition, errs.ReasonCAInUse,
		"nodes %s have not renewed since the rotation began, so they do not trust the new CA yet: wait for their renewal, or give --force (they must then join again)",
		strings.Join(behind, ", "))
}

// retireCA is step 3: the old CA is trusted no more.
func (s *Server) retireCA(ctx context.Context, force bool) (store.CARecord, store.OtherCA, error) {
	var old store.OtherCA
	rec, err := s.caStep(ctx, func(rec *store.CARecord) error {
		var ok bool
		if old, ok = rec.Other(store.CAOld); !ok {
			if _, next := rec.Other(store.CANext); next {
				return errs.New(errs.KindFailedPrecondition, errs.ReasonCAState, "the new CA is not signing yet: `cast ca activate` first, then retire the old one")
			}
			return errs.New(errs.KindFailedPrecondition, errs.ReasonCAState, "no old CA to retire: no rotation is under way")
		}
		pin := storedPin(store.CARecord{CertPEM: old.CertPEM})
		if !force {
			if err := s.noneOnOld(ctx, pin); err != nil {
				return err
			}
		}
		subject := ""
		if c, err := pki.ParseCert(old.CertPEM); err == nil {
			subject = c.Subject.CommonName
		}
		rec.Others = nil
		rec.Retired = append(rec.Retired, store.RetiredCA{Pin: pin, Subject: subject, CertPEM: old.CertPEM, At: time.Now().UTC()})
		if n := len(rec.Retired); n > maxRetiredCAs {
			rec.Retired = rec.Retired[n-maxRetiredCAs:]
		}
		return nil
	})
	return rec, old, err
}

// noneOnOld refuses while a principal's latest live certificate is from
// the CA of pin: retiring it would lock them out.
func (s *Server) noneOnOld(ctx context.Context, pin string) error {
	issues, err := s.store.CertIssues(ctx, time.Now())
	if err != nil {
		return err
	}
	var nodes, users []string
	for _, c := range latestByCred(issues) {
		if c.IssuerPin != pin {
			continue
		}
		who := fmt.Sprintf("%s (until %s)", c.Name, c.Expires.UTC().Format(time.RFC3339))
		if c.Role == "node" {
			nodes = append(nodes, who)
		} else {
			users = append(users, c.Role+":"+who)
		}
	}
	if len(nodes)+len(users) == 0 {
		return nil
	}
	sort.Strings(nodes)
	sort.Strings(users)
	var parts []string
	if len(nodes) > 0 {
		parts = append(parts, "nodes "+strings.Join(nodes, ", ")+" (they renew onto the new CA at two thirds of their lifetime)")
	}
	if len(users) > 0 {
		parts = append(parts, "users "+strings.Join(users, ", ")+" (`cast token cert` gets a new one)")
	}
	return errs.New(errs.KindFailedPrecondition, errs.ReasonCAInUse,
		"live certificates from the old CA are still the latest of %s: wait, or give --force (they must then join again or get a new certificate)", strings.Join(parts, "; "))
}

// latestByCred keeps each credential's latest certificate.
func latestByCred(issues []store.CertIssue) []store.CertIssue {
	last := map[string]store.CertIssue{}
	for _, c := range issues {
		if l, ok := last[c.Cred]; !ok || c.Issued.After(l.Issued) {
			last[c.Cred] = c
		}
	}
	out := make([]store.CertIssue, 0, len(last))
	for _, c := range last {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Role+out[i].Name < out[j].Role+out[j].Name })
	return out
}

// pins are the pins of the trusted CAs, the bundle's.
func (set *caSet) pins() []string {
	out := make([]string, 0, len(set.trusted))
	for _, c := range set.trusted {
		out = append(out, pki.Pin(c))
	}
	return out
}

// retiredIssuer names the retired CA that signed leaf, "" for none.
func (set *caSet) retiredIssuer(leaf *x509.Certificate) string {
	ca := pki.IssuerOf(leaf, set.retired)
	if ca == nil {
		return ""
	}
	for _, r := range set.rec.Retired {
		if r.Pin == pki.Pin(ca) {
			return fmt.Sprintf("%s, retired %s", r.Pin, r.At.UTC().Format(time.RFC3339))
		}
	}
	return pki.Pin(ca)
}
