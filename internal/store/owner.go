package store

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/errs"
)

// ReassignOwner moves the session to node in one txn, only if the owner
// token is still expect. It returns the new token (the txn's revision: every
// op in a txn shares it). The old owner's token is dead from then on.
// Migration (fence, drain, commit) builds on this compare-and-swap.
func (s *Store) ReassignOwner(ctx context.Context, sessionID string, expect int64, node string) (int64, error) {
	defer s.observe("reassign_owner", time.Now())
	old, tok, err := s.Owner(ctx, sessionID)
	if err != nil {
		return 0, err
	}
	if tok != expect {
		return 0, errs.New(errs.KindAborted, errs.ReasonNotOwner, "owner changed meanwhile (token %d, expected %d)", tok, expect)
	}
	ops := []clientv3.Op{clientv3.OpPut(s.ownerKey(sessionID), node), clientv3.OpPut(s.nodeSessKey(node, sessionID), "")}
	if old != node { // a txn may not put and delete the same key
		ops = append(ops, clientv3.OpDelete(s.nodeSessKey(old, sessionID)))
	}
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(s.ownerKey(sessionID)), "=", expect),
		clientv3.Compare(clientv3.CreateRevision(s.connKey(node)), ">", 0),
	).Then(ops...).Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, errs.New(errs.KindAborted, errs.ReasonConflict, "owner changed or node %q is not connected", node)
	}
	return resp.Header.Revision, nil
}
