package store

import (
	"context"
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/errs"
)

// A CA rotation is one CARecord (the signing CA and the others trusted
// during the rotation), changed only by compare-and-swap (ReplaceCA), so
// replicas agree on it; and one record per credential and issuing CA of
// the latest certificate issued, so retiring a CA can name who still
// holds a live certificate from it.

// CA states during a rotation.
const (
	CANext = "next" // trusted, signs after ActivateCA
	CAOld  = "old"  // trusted until RetireCA, signs no more
)

// OtherCA is a CA trusted beside the signing one. A next CA's key is
// sealed like the signing one's; an old CA keeps no key (it never signs
// again).
type OtherCA struct {
	CertPEM   []byte    `json:"cert_pem"`
	SealedKey []byte    `json:"sealed_key,omitempty"`
	State     string    `json:"state"`
	Since     time.Time `json:"since"`
}

// RetiredCA is a CA no longer trusted.
type RetiredCA struct {
	Pin     string    `json:"pin"`
	Subject string    `json:"subject"`
	CertPEM []byte    `json:"cert_pem"`
	At      time.Time `json:"at"`
}

// Other returns the other CA in state, if any.
func (r CARecord) Other(state string) (OtherCA, bool) {
	for _, o := range r.Others {
		if o.State == state {
			return o, true
		}
	}
	return OtherCA{}, false
}

// CertIssue is the latest certificate a credential got from one CA.
type CertIssue struct {
	Cred      string    `json:"cred"`
	Role      string    `json:"role"`
	Name      string    `json:"name"`
	IssuerPin string    `json:"issuer_pin"`
	Issued    time.Time `json:"issued"`
	Expires   time.Time `json:"expires"`
	// Trusts are the pins of the bundle handed out with the certificate:
	// a replica that has not reloaded a rotation yet hands out one
	// without the new CA, however late it signs.
	Trusts []string `json:"trusts,omitempty"`
}

func (s *Store) certIssueKey(cred, pin string) string { return s.key("certissues", cred, pin) }

// RecordCertIssue keeps c as the latest certificate of its credential
// from its CA.
func (s *Store) RecordCertIssue(ctx context.Context, c CertIssue) error {
	b, err := json.Marshal(c)
	if err != nil {
		return errs.Internal(err, "encode certificate issue")
	}
	_, err = s.cli.Put(ctx, s.certIssueKey(c.Cred, c.IssuerPin), string(b))
	return err
}

// CertIssues lists the recorded certificates still valid at now whose
// credential is live (a revoked credential's certificates are refused
// anyway), dropping the records of expired ones.
func (s *Store) CertIssues(ctx context.Context, now time.Time) ([]CertIssue, error) {
	resp, err := s.cli.Get(ctx, s.key("certissues")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []CertIssue
	for _, kv := range resp.Kvs {
		var c CertIssue
		if err := json.Unmarshal(kv.Value, &c); err != nil {
			return nil, errs.Internal(err, "decode certificate issue")
		}
		if !now.Before(c.Expires) {
			// Best effort: a failed delete is retried by the next list.
			_, _ = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
				Then(clientv3.OpDelete(string(kv.Key))).Commit()
			continue
		}
		if rec, live, err := s.LookupToken(ctx, c.Cred); err != nil {
			return nil, err
		} else if live && rec.Role == c.Role && rec.Name == c.Name {
			out = append(out, c)
		}
	}
	return out, nil
}

// WatchCA calls changed after each write of the CA record (a rotation
// step, whichever replica took it) until ctx ends; the caller reads the
// record again. When the watch ends (compacted or refused) it watches
// again from now: a write in between is seen by the caller's own polls.
func (s *Store) WatchCA(ctx context.Context, changed func()) {
	for ctx.Err() == nil {
		for b := range s.follow(ctx, s.caKey(), 0) {
			if b.Err != nil {
				s.lg.Warn("CA record watch ended; watching again from now", zap.Error(b.Err))
				break
			}
			changed()
		}
		select {
		case <-ctx.Done():
		case <-time.After(revocationRewatch):
		}
	}
}
