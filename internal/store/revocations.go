package store

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/tick"
)

// revocationRewatch is how long WatchRevocations waits before watching
// again from now after its watch ended (compacted or refused).
const revocationRewatch = 200 * time.Millisecond

// WatchRevocations follows the credential records (authtokens/) until ctx
// ends: revoked gets the hash of each one deleted (`cast token rm`, `cast
// node rm`, a node's credential replaced by a new join), whichever replica
// deleted it. opened runs each time the watch starts from now, before any
// event of it: a deletion before that start is seen only by a caller that
// looks its credentials up again then. (While it runs, follow re-opens the
// watch from its revision, so nothing is missed in between.) closed runs
// each time a watch ends: until the next opened, deletions go unseen.
func (s *Store) WatchRevocations(ctx context.Context, opened, closed func(), revoked func(hash string)) {
	for ctx.Err() == nil {
		err := s.watchRevocationsOnce(ctx, opened, revoked)
		closed()
		if ctx.Err() != nil {
			return
		}
		s.lg.Warn("credential revocation watch ended; watching again from now", zap.Error(err))
		tick.Sleep(ctx, revocationRewatch)
	}
}

// watchRevocationsOnce watches from the current revision R: opened runs
// once R is known (a look-up then sees every deletion up to R, the watch
// every one after), until the watch ends or ctx does.
func (s *Store) watchRevocationsOnce(ctx context.Context, opened func(), revoked func(hash string)) error {
	prefix := s.key("authtokens") + "/"
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := s.follow(wctx, prefix, resp.Header.Revision+1, clientv3.WithPrefix(), clientv3.WithFilterPut())
	opened()
	for b := range wch {
		if b.Err != nil {
			return b.Err
		}
		for _, ev := range b.Events {
			revoked(lastPart(string(ev.Kv.Key)))
		}
	}
	return ctx.Err()
}
