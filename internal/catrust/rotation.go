package catrust

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/pki"
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

// Rotate is step 1: next is made here (certPEM and keyPEM empty) or an
// operator's, its key sealed with the secrets key.
func (m *Manager) Rotate(ctx context.Context, certPEM, keyPEM []byte) (Record, error) {
	next, err := m.nextCA(certPEM, keyPEM)
	if err != nil {
		return Record{}, err
	}
	box, err := m.cfg.Box()
	if err != nil {
		// Its own reason (a key file others can read, a malformed key),
		// not a plain error the status mapping takes for a store outage.
		return Record{}, errs.New(errs.KindFailedPrecondition, errs.ReasonNoSecretsKey,
			"a rotated CA's key is kept sealed with the secrets key, which cannot be opened: %v", err)
	}
	if box == nil {
		return Record{}, errs.New(errs.KindFailedPrecondition, errs.ReasonNoSecretsKey,
			"a rotated CA's key is kept sealed in the store: start the control plane with --secrets-key-file")
	}
	keyDER, err := next.KeyDER()
	if err != nil {
		return Record{}, errs.Internal(err, "encode CA key")
	}
	sealed, err := box.Seal(keyDER, KeyAAD)
	if err != nil {
		return Record{}, err
	}
	return m.step(ctx, func(rec *Record) error {
		if len(rec.Others) > 0 {
			return errs.New(errs.KindFailedPrecondition, errs.ReasonCAState,
				"a CA rotation is under way (%s CA %s): finish it first (`cast ca status`, then `cast ca activate` or `cast ca retire`)", rec.Others[0].State, StoredPin(Record{CertPEM: rec.Others[0].CertPEM}))
		}
		if pki.Pin(next.Cert) == StoredPin(*rec) {
			return errs.Invalid("the new CA has the signing CA's key: a rotation needs a new key")
		}
		rec.Others = []OtherCA{{CertPEM: next.CertPEM, SealedKey: sealed, State: Next, Since: time.Now().UTC()}}
		return nil
	})
}

// nextCA is the CA a rotation moves to.
func (m *Manager) nextCA(certPEM, keyPEM []byte) (*pki.CA, error) {
	if len(certPEM) == 0 && len(keyPEM) == 0 {
		c, k, err := pki.NewCA(m.cfg.CATTL)
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

// Activate is step 2: the next CA signs; the signing one becomes old
// (trusted, keyless: it never signs again).
func (m *Manager) Activate(ctx context.Context, force bool) (Record, error) {
	return m.step(ctx, func(rec *Record) error {
		next, ok := rec.Other(Next)
		if !ok {
			return errs.New(errs.KindFailedPrecondition, errs.ReasonCAState, "no new CA to activate: start a rotation with `cast ca rotate`")
		}
		if !force {
			if err := m.noneBehind(ctx, StoredPin(Record{CertPEM: next.CertPEM}), next.Since); err != nil {
				return err
			}
		}
		old := OtherCA{CertPEM: rec.CertPEM, State: Old, Since: time.Now().UTC()}
		rec.CertPEM, rec.SealedKey, rec.Operator = next.CertPEM, next.SealedKey, false
		rec.Others = []OtherCA{old}
		return nil
	})
}

// noneBehind refuses while a node holding a live certificate was not
// handed the new CA (of pin) with its latest one: it has not learnt it,
// and would not trust the server's next certificate. A renewal after the
// rotation began on a replica that had not reloaded it yet does not
// count; a record from before issues named their bundle goes by since.
func (m *Manager) noneBehind(ctx context.Context, pin string, since time.Time) error {
	issues, err := m.st.CertIssues(ctx, time.Now())
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

// Retire is step 3: the old CA is trusted no more.
func (m *Manager) Retire(ctx context.Context, force bool) (Record, OtherCA, error) {
	var old OtherCA
	rec, err := m.step(ctx, func(rec *Record) error {
		var ok bool
		if old, ok = rec.Other(Old); !ok {
			if _, next := rec.Other(Next); next {
				return errs.New(errs.KindFailedPrecondition, errs.ReasonCAState, "the new CA is not signing yet: `cast ca activate` first, then retire the old one")
			}
			return errs.New(errs.KindFailedPrecondition, errs.ReasonCAState, "no old CA to retire: no rotation is under way")
		}
		pin := StoredPin(Record{CertPEM: old.CertPEM})
		if !force {
			if err := m.noneOnOld(ctx, pin); err != nil {
				return err
			}
		}
		subject := ""
		if c, err := pki.ParseCert(old.CertPEM); err == nil {
			subject = c.Subject.CommonName
		}
		rec.Others = nil
		rec.Retired = append(rec.Retired, RetiredCA{Pin: pin, Subject: subject, CertPEM: old.CertPEM, At: time.Now().UTC()})
		if n := len(rec.Retired); n > maxRetiredCAs {
			rec.Retired = rec.Retired[n-maxRetiredCAs:]
		}
		return nil
	})
	return rec, old, err
}

// noneOnOld refuses while a principal's latest live certificate is from
// the CA of pin: retiring it would lock them out.
func (m *Manager) noneOnOld(ctx context.Context, pin string) error {
	issues, err := m.st.CertIssues(ctx, time.Now())
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
func latestByCred(issues []CertIssue) []CertIssue {
	last := map[string]CertIssue{}
	for _, c := range issues {
		if l, ok := last[c.Cred]; !ok || c.Issued.After(l.Issued) {
			last[c.Cred] = c
		}
	}
	out := make([]CertIssue, 0, len(last))
	for _, c := range last {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Role+out[i].Name < out[j].Role+out[j].Name })
	return out
}
