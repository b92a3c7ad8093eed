package store

import (
	"context"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The web timeline's sign-ins (internal/web): one-time login codes and
// browser sessions, each a key bound to a lease of its lifetime, holding
// the principal it stands for, by the SHA-256 of its secret. In etcd, so
// any replica honours a link another made and a restart signs no one out.
//
//	webcodes/{hash}     a login code's grant, leased for the code's minute; taken once
//	websessions/{hash}  a browser session's grant, leased until it ends
//	weboidcflows/{hash} an OIDC sign-in's PKCE verifier, leased until its callback is due; taken once
//
// kind is the prefix: webcodes, websessions or weboidcflows.

// PutWebGrant stores value under kind for ttl.
func (s *Store) PutWebGrant(ctx context.Context, kind, hash string, value []byte, ttl time.Duration) error {
	l, err := s.cli.Grant(ctx, int64(max((ttl+time.Second-1)/time.Second, 1)))
	if err != nil {
		return err
	}
	_, err = s.cli.Put(ctx, s.key(kind, hash), string(value), clientv3.WithLease(l.ID))
	return err
}

// TakeWebGrant reads and deletes a grant in one txn, so it is used once;
// ok is false when it is gone (never made, used or lapsed).
func (s *Store) TakeWebGrant(ctx context.Context, kind, hash string) ([]byte, bool, error) {
	k := s.key(kind, hash)
	tx, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), ">", 0)).
		Then(clientv3.OpGet(k), clientv3.OpDelete(k)).Commit()
	if err != nil || !tx.Succeeded {
		return nil, false, err
	}
	kvs := tx.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil, false, nil
	}
	return kvs[0].Value, true, nil
}

// GetWebGrant reads a grant.
func (s *Store) GetWebGrant(ctx context.Context, kind, hash string) ([]byte, bool, error) {
	resp, err := s.cli.Get(ctx, s.key(kind, hash))
	if err != nil || len(resp.Kvs) == 0 {
		return nil, false, err
	}
	return resp.Kvs[0].Value, true, nil
}

// DeleteWebGrant ends a grant (sign-out).
func (s *Store) DeleteWebGrant(ctx context.Context, kind, hash string) error {
	_, err := s.cli.Delete(ctx, s.key(kind, hash))
	return err
}

// FollowWebGrantEnds calls ended with the hash of each grant of kind that
// ends (deleted: a sign-out, or its lease lapsed), until ctx ends: every
// replica ends the calls a browser session has open when it signs out
// through any of them.
func (s *Store) FollowWebGrantEnds(ctx context.Context, kind string, ended func(hash string)) {
	prefix := s.key(kind) + "/"
	s.followDeletes(ctx, prefix, func(key string, _ []byte) { ended(strings.TrimPrefix(key, prefix)) })
}
