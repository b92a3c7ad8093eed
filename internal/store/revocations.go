package store

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// revocationRewatch is how long WatchRevocations waits before opening its
// watch again after etcd ended it.
const revocationRewatch = 200 * time.Millisecond

// WatchRevocations follows the credential records (authtokens/) until ctx
// ends: revoked gets the hash of each one deleted (`cast token rm`, `cast
// node rm`, a node's credential replaced by a new join), whichever replica
// deleted it. opened runs each time the watch is (re)established, before
// any event of it: a deletion while no watch was open is seen only by a
// caller that looks its credentials up again then.
//
// Its own function, with its own simple re-open loop: internal/store's
// shared watch helper (re-opening after token expiry and cancellation)
// may take it over.
func (s *Store) WatchRevocations(ctx context.Context, opened func(), revoked func(hash string)) {
	for ctx.Err() == nil {
		s.watchRevocationsOnce(ctx, opened, revoked)
		select {
		case <-ctx.Done():
		case <-time.After(revocationRewatch): // the watch broke; open a new one
		}
	}
}

// watchRevocationsOnce runs one etcd watch of WatchRevocations until etcd
// ends it (canceled, compacted, no leader) or ctx ends.
func (s *Store) watchRevocationsOnce(ctx context.Context, opened func(), revoked func(hash string)) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := s.cli.Watch(wctx, s.key("authtokens")+"/", clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	for wr := range wch {
		if wr.Canceled || wr.Err() != nil {
			return
		}
		if wr.Created {
			opened()
		}
		for _, ev := range wr.Events {
			revoked(lastPart(string(ev.Kv.Key)))
		}
	}
}
