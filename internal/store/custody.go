package store

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CustodyEtcd hands token custody's vault (internal/custody/vault) the
// etcd client and this store's key prefix; the vault keeps its own keys
// under {prefix}custody/.
func (s *Store) CustodyEtcd() (*clientv3.Client, string) { return s.cli, s.cfg.Prefix }

// NodeLease returns the lease node's connection record is bound to (0
// when the node is not connected): a custodian is elected under it, so
// custody lapses with the node's connection.
func (s *Store) NodeLease(ctx context.Context, node string) (clientv3.LeaseID, error) {
	resp, err := s.cli.Get(ctx, s.connKey(node))
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease), nil
}
