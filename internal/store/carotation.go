package store

import (
	"context"
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/catrust"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/tick"
)

// A CA rotation is one CARecord (the signing CA and the others trusted
// during the rotation), changed only by compare-and-swap (ReplaceCA), so
// replicas agree on it; and one record per credential and issuing CA of
// the latest certificate issued, so retiring a CA can name who still
// holds a live certificate from it.

func (s *Store) certIssueKey(cred, pin string) string { return s.key("certissues", cred, pin) }

// RecordCertIssue keeps c as the latest certificate of its credential
// from its CA.
func (s *Store) RecordCertIssue(ctx context.Context, c catrust.CertIssue) error {
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
func (s *Store) CertIssues(ctx context.Context, now time.Time) ([]catrust.CertIssue, error) {
	resp, err := s.cli.Get(ctx, s.key("certissues")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []catrust.CertIssue
	for _, kv := range resp.Kvs {
		var c catrust.CertIssue
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
		tick.Sleep(ctx, revocationRewatch)
	}
}
