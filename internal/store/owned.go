package store

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
)

// ownedPage is how many sessions one read txn covers: four gets each stays
// within etcd's default limit of 128 operations per txn.
const ownedPage = 32

// EachOwnedSession calls fn with the sessions node owns, with their tokens,
// a page at a time in id order; each page is one txn. A node that owns
// 10,000 sessions costs a few hundred round trips instead of two per
// session, and the caller hands each page on before the next is read.
// Index entries of sessions that moved away are skipped.
//
// The index is listed scanPage keys a read, not a page's worth: etcd
// counts every key left in the range on each limited read, so reads of 32
// keys made a node's resync grow with the square of its sessions (20,000
// took 2.8 times as long as 10,000; BenchmarkNodeReconnect).
func (s *Store) EachOwnedSession(ctx context.Context, node string, fn func([]fence.OwnedSession) error) error {
	return scanPages(ctx, s.cli, s.key("nodesessions", node)+"/", scanPage, func(kvs []*mvccpb.KeyValue) error {
		for len(kvs) > 0 {
			n := min(len(kvs), ownedPage)
			ids := make([]string, n)
			for i, kv := range kvs[:n] {
				ids[i] = lastPart(string(kv.Key))
			}
			kvs = kvs[n:]
			page, err := s.readOwned(ctx, node, ids)
			if err != nil {
				return err
			}
			if len(page) == 0 {
				continue
			}
			if err := fn(page); err != nil {
				return err
			}
		}
		return nil
	}, clientv3.WithKeysOnly())
}

// readOwned reads ids in one txn and keeps those node still owns.
func (s *Store) readOwned(ctx context.Context, node string, ids []string) ([]fence.OwnedSession, error) {
	ops := make([]clientv3.Op, 0, 4*len(ids))
	for _, id := range ids {
		ops = append(ops, s.sessionOps(id)...)
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	out := make([]fence.OwnedSession, 0, len(ids))
	for i, id := range ids {
		r := resp.Responses[4*i : 4*i+4]
		own := r[2].GetResponseRange().Kvs
		if len(own) == 0 || string(own[0].Value) != node {
			continue // moved away; the index entry is stale
		}
		sess, err := decodeSession(id, r)
		if errs.HasReason(err, errs.ReasonNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, fence.OwnedSession{Session: sess, Token: own[0].ModRevision})
	}
	return out, nil
}

// MovedFrom returns, of ids, the owner of each that the last migration
// away from node moved to it (absent ids, and any moved on or never moved
// from node, are missing from the map). It reads the migrated/{s}/{node}
// index the commit writes, 64 sessions per txn, never the migration
// records: a node reconnects with sessions it lost whatever the number
// of migrations ever run. Migrations committed before that index are not
// in it (their sources are released without the owner; their checkouts
// are then not cleaned).
func (s *Store) MovedFrom(ctx context.Context, node string, ids []string) (map[string]string, error) {
	out := map[string]string{}
	for len(ids) > 0 {
		n := min(len(ids), 2*ownedPage)
		ops := make([]clientv3.Op, 0, 2*n)
		for _, id := range ids[:n] {
			ops = append(ops, clientv3.OpGet(s.ownerKey(id)), clientv3.OpGet(s.migratedKey(id, node)))
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, err
		}
		for i, id := range ids[:n] {
			own, to := resp.Responses[2*i].GetResponseRange().Kvs, resp.Responses[2*i+1].GetResponseRange().Kvs
			if len(own) > 0 && len(to) > 0 && string(own[0].Value) == string(to[0].Value) {
				out[id] = string(own[0].Value)
			}
		}
		ids = ids[n:]
	}
	return out, nil
}

// AdoptUnowned makes node the owner of every unowned session (imports
// stored while no node was connected), each in a txn that commits only
// while the session is still unowned: of nodes connecting at once, the
// first takes it. It returns those node took, with their tokens. Called
// once node's connection key exists: CreateSession stores a session
// unowned only while no node is connected, so none is stored after this
// lists them.
func (s *Store) AdoptUnowned(ctx context.Context, node string) ([]fence.OwnedSession, error) {
	defer s.observe("adopt_unowned", time.Now())
	resp, err := s.cli.Get(ctx, s.key("unowned")+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	var took []string
	for _, kv := range resp.Kvs {
		id := lastPart(string(kv.Key))
		txn, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.Value(s.ownerKey(id)), "=", ""),
			clientv3.Compare(clientv3.CreateRevision(s.nodeSessKey("", id)), ">", 0),
		).Then(
			clientv3.OpPut(s.ownerKey(id), node),
			clientv3.OpPut(s.nodeSessKey(node, id), ""),
			clientv3.OpDelete(s.nodeSessKey("", id)),
		).Commit()
		if err != nil {
			return nil, err
		}
		if txn.Succeeded {
			took = append(took, id)
		}
	}
	var out []fence.OwnedSession
	for len(took) > 0 {
		n := min(len(took), ownedPage)
		page, err := s.readOwned(ctx, node, took[:n])
		if err != nil {
			return nil, err
		}
		out, took = append(out, page...), took[n:]
	}
	return out, nil
}
