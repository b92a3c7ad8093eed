package store

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/catrust"
	"github.com/cast-dev/cast/internal/errs"
)

// Credentials, stored only as hashes (authz.Hash):
//
//	authtokens/{hash}  TokenRecord: the principal a bearer token names
//	authnames/{name}   hash of the admin or user token called name
//	authnodes/{name}   hash of node name's credential (one per node)
//	jointokens/{hash}  a join token's uses left (decimal), bound to a lease (its expiry)
//	authbootstrap      present once the first admin token was made
//	tlsca              the TLS CA: certificate, and its key sealed (secrets.Box)
//
// A node's credential replaces its previous one in the same transaction,
// and revocation deletes it: the next call with it is refused.

// TokenRecord is the principal a token stands for.
type TokenRecord struct {
	Role    string    `json:"role"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

func (s *Store) authTokenKey(hash string) string { return s.key("authtokens", hash) }
func (s *Store) authNameKey(name string) string  { return s.key("authnames", name) }
func (s *Store) authNodeKey(name string) string  { return s.key("authnodes", name) }
func (s *Store) joinTokenKey(hash string) string { return s.key("jointokens", hash) }
func (s *Store) bootstrapKey() string            { return s.key("authbootstrap") }

// LookupToken returns the principal of a token hash; ok is false for an
// unknown (or revoked) one. The read is linearizable, so a revocation on
// any replica holds for the next call.
func (s *Store) LookupToken(ctx context.Context, hash string) (TokenRecord, bool, error) {
	r, _, found, err := getJSON[TokenRecord](ctx, s.cli, s.authTokenKey(hash), "token")
	return r, found, err
}

func tokenRecord(role, name string) (string, error) {
	b, err := json.Marshal(TokenRecord{Role: role, Name: name, Created: time.Now().UTC()})
	return string(b), err
}

// Bootstrap stores the first admin token (by hash) unless one was ever
// made; it reports whether this call made it.
func (s *Store) Bootstrap(ctx context.Context, hash, name string) (bool, error) {
	rec, err := tokenRecord("admin", name)
	if err != nil {
		return false, errs.Internal(err, "encode token")
	}
	tx, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(s.bootstrapKey()), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(s.authNameKey(name)), "=", 0),
	).Then(
		clientv3.OpPut(s.bootstrapKey(), "1"),
		clientv3.OpPut(s.authTokenKey(hash), rec),
		clientv3.OpPut(s.authNameKey(name), hash),
	).Commit()
	if err != nil {
		return false, err
	}
	return tx.Succeeded, nil
}

// Bootstrapped reports whether the first admin token was made.
func (s *Store) Bootstrapped(ctx context.Context) (bool, error) {
	resp, err := s.cli.Get(ctx, s.bootstrapKey(), clientv3.WithCountOnly())
	if err != nil {
		return false, err
	}
	return resp.Count > 0, nil
}

// CreateToken stores an admin or user token by hash under a unique name.
func (s *Store) CreateToken(ctx context.Context, hash, role, name string) error {
	rec, err := tokenRecord(role, name)
	if err != nil {
		return errs.Internal(err, "encode token")
	}
	tx, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(s.authNameKey(name)), "=", 0)).
		Then(clientv3.OpPut(s.authTokenKey(hash), rec), clientv3.OpPut(s.authNameKey(name), hash)).Commit()
	if err != nil {
		return err
	}
	if !tx.Succeeded {
		return errs.New(errs.KindAlreadyExists, errs.ReasonAlreadyExists, "a token named %q exists; delete it first (cast token rm %s)", name, name).With("name", name)
	}
	return nil
}

// ListTokens lists admin and user tokens by name.
func (s *Store) ListTokens(ctx context.Context) ([]TokenRecord, error) {
	resp, err := s.cli.Get(ctx, s.key("authtokens")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []TokenRecord
	for _, kv := range resp.Kvs {
		var r TokenRecord
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, errs.Internal(err, "decode token")
		}
		if r.Role != "node" {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteToken revokes the admin or user token called name; it returns the
// deleted credential's hash ("" if there was none).
func (s *Store) DeleteToken(ctx context.Context, name string) (string, error) {
	return s.deleteIndexed(ctx, s.authNameKey(name))
}

// RevokeNode deletes node name's credential; the node must join again.
// `cast node rm` calls it. It returns the deleted credential's hash (""
// if there was none).
func (s *Store) RevokeNode(ctx context.Context, name string) (string, error) {
	return s.deleteIndexed(ctx, s.authNodeKey(name))
}

// deleteIndexed deletes an index key and the token it points at, unless
// the index changed meanwhile (then it retries), and returns the token's
// hash.
func (s *Store) deleteIndexed(ctx context.Context, idx string) (string, error) {
	for range 10 {
		resp, err := s.cli.Get(ctx, idx)
		if err != nil || len(resp.Kvs) == 0 {
			return "", err
		}
		kv := resp.Kvs[0]
		tx, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(idx), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(idx), clientv3.OpDelete(s.authTokenKey(string(kv.Value)))).Commit()
		if err != nil {
			return "", err
		}
		if tx.Succeeded {
			return string(kv.Value), nil
		}
	}
	return "", errs.New(errs.KindAborted, errs.ReasonConflict, "the credential kept changing; retry")
}

// CreateJoinToken stores a join token by hash for ttl, good for uses
// joins (one, unless a StatefulSet's pods share it).
func (s *Store) CreateJoinToken(ctx context.Context, hash string, ttl time.Duration, uses int) error {
	l, err := s.cli.Grant(ctx, int64(max(ttl/time.Second, 1)))
	if err != nil {
		return err
	}
	_, err = s.cli.Put(ctx, s.joinTokenKey(hash), strconv.Itoa(max(uses, 1)), clientv3.WithLease(l.ID))
	return err
}

// JoinTokenUses is how many joins the join token hash has left: 0 once
// it is used up, expired or unknown.
func (s *Store) JoinTokenUses(ctx context.Context, hash string) (int, error) {
	resp, err := s.cli.Get(ctx, s.joinTokenKey(hash))
	if err != nil || len(resp.Kvs) == 0 {
		return 0, err
	}
	left, err := parseInt(resp.Kvs[0].Value)
	if err != nil {
		return 0, errs.Internal(err, "decode join token uses")
	}
	return int(left), nil
}

// useJoinToken returns the compare and the op that spend one use of the
// join token (the last use deletes it), or a refusal when it is gone.
func (s *Store) useJoinToken(ctx context.Context, hash string) (clientv3.Cmp, clientv3.Op, error) {
	k := s.joinTokenKey(hash)
	resp, err := s.cli.Get(ctx, k)
	if err != nil {
		return clientv3.Cmp{}, clientv3.Op{}, err
	}
	if len(resp.Kvs) == 0 {
		return clientv3.Cmp{}, clientv3.Op{}, errs.New(errs.KindUnauthenticated, errs.ReasonJoinToken,
			"the join token is unknown, used or expired; make a new one with `cast node token create`")
	}
	kv := resp.Kvs[0]
	cmp := clientv3.Compare(clientv3.ModRevision(k), "=", kv.ModRevision)
	if left, _ := parseInt(kv.Value); left > 1 {
		return cmp, clientv3.OpPut(k, strconv.FormatInt(left-1, 10), clientv3.WithIgnoreLease()), nil
	}
	return cmp, clientv3.OpDelete(k), nil
}

// JoinNode spends one use of the join token joinHash and makes credHash
// node name's credential, replacing (revoking) any earlier one, in one
// transaction: a join token works as many times as it was made for. An
// empty joinHash is an admin's enrollment.
func (s *Store) JoinNode(ctx context.Context, joinHash, name, credHash string) error {
	rec, err := tokenRecord("node", name)
	if err != nil {
		return errs.Internal(err, "encode token")
	}
	idx := s.authNodeKey(name)
	for range 10 {
		resp, err := s.cli.Get(ctx, idx)
		if err != nil {
			return err
		}
		var rev int64
		ops := []clientv3.Op{clientv3.OpPut(s.authTokenKey(credHash), rec), clientv3.OpPut(idx, credHash)}
		if len(resp.Kvs) > 0 {
			rev = resp.Kvs[0].ModRevision
			ops = append(ops, clientv3.OpDelete(s.authTokenKey(string(resp.Kvs[0].Value))))
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(idx), "=", rev)}
		if joinHash != "" {
			cmp, op, err := s.useJoinToken(ctx, joinHash)
			if err != nil {
				return err
			}
			cmps, ops = append(cmps, cmp), append(ops, op)
		}
		tx, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return err
		}
		if tx.Succeeded {
			return nil
		}
	}
	return errs.New(errs.KindAborted, errs.ReasonConflict, "node %q's credential kept changing; retry", name)
}

func (s *Store) caKey() string { return s.key("tlsca") }

// GetCA returns the stored CA; ok is false before the first one is made.
func (s *Store) GetCA(ctx context.Context) (catrust.Record, bool, error) {
	r, rev, found, err := getJSON[catrust.Record](ctx, s.cli, s.caKey(), "CA")
	r.Rev = rev
	return r, found, err
}

// PutCAIfAbsent stores r unless a CA exists (replicas starting at once
// agree on the first); the caller reads it back either way.
func (s *Store) PutCAIfAbsent(ctx context.Context, r catrust.Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return errs.Internal(err, "encode CA")
	}
	_, err = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(s.caKey()), "=", 0)).
		Then(clientv3.OpPut(s.caKey(), string(b))).Commit()
	return err
}

// ReplaceCA stores r in place of old, unless the record changed since old
// was read (another replica replaced it first).
func (s *Store) ReplaceCA(ctx context.Context, old, r catrust.Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return errs.Internal(err, "encode CA")
	}
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(s.caKey()), "=", old.Rev)).
		Then(clientv3.OpPut(s.caKey(), string(b))).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return errs.New(errs.KindAborted, errs.ReasonConflict, "the TLS CA changed while it was being replaced; start again")
	}
	return nil
}
