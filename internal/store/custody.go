package store

import (
	"context"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/fence"
	"github.com/cast-dev/cast/internal/tick"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// NodeLease returns the lease node's connection record is bound to (0
// when the node is not connected): a custodian is elected under it, so
// custody lapses with the node's connection.
func (s *Store) NodeLease(ctx context.Context, node string) (fence.Lease, error) {
	resp, err := s.cli.Get(ctx, s.connKey(node))
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return fence.Lease(resp.Kvs[0].Lease), nil
}

// CustodyLogins counts the logins custody holds, each sealed with the
// secrets key, their account stored or not (the vault's {agent}/{account}/cred
// keys: vault.go).
func (s *Store) CustodyLogins(ctx context.Context) (int, error) {
	resp, err := s.cli.Get(ctx, s.cfg.Prefix+"custody/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), "/cred") {
			n++
		}
	}
	return n, nil
}

// FollowCustodyDeletes calls deleted with each key under custody's prefix
// that etcd deletes (a custodian's lease lapsing, an account removed) and
// the value it had, until ctx ends; the control plane's audit of who held
// a login until when. A watch that ends for good (compacted history) is
// opened again from now.
func (s *Store) FollowCustodyDeletes(ctx context.Context, deleted func(key string, prev []byte)) {
	s.followDeletes(ctx, s.cfg.Prefix+"custody/", deleted)
}

// followDeletes calls deleted with each key under prefix that etcd
// deletes and the value it had, until ctx ends. A watch that ends for good
// (compacted history) is opened again from now.
func (s *Store) followDeletes(ctx context.Context, prefix string, deleted func(key string, prev []byte)) {
	for ctx.Err() == nil {
		for b := range s.follow(ctx, prefix, 0, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithPrevKV()) {
			if b.Err != nil {
				s.lg.Warn("deletes watch ended; watching again from now", zap.String("prefix", prefix), zap.Error(b.Err))
				break
			}
			for _, ev := range b.Events {
				if ev.PrevKv != nil {
					deleted(string(ev.Kv.Key), ev.PrevKv.Value)
				}
			}
		}
		tick.Sleep(ctx, time.Second)
	}
}
