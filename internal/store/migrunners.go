package store

import (
	"context"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Migration runners: a replica runs a migration only while it holds the
// migration's runner key (migrunners/{m}), put under a lease the replica
// keeps alive. A replica that dies (kill -9, lost host) stops renewing;
// etcd drops the key when the lease lapses and another replica claims the
// migration and resumes it where the store says it is. Steps stay
// compare-and-swap guarded, so a runner that lost its lease while still
// running cannot win a step its successor already took.

// RunnerLease grants a lease of ttl and keeps it alive until ctx ends; lost
// is closed when it can no longer be renewed (it lapsed while etcd was out
// of reach), and the caller takes a new one.
func (s *Store) RunnerLease(ctx context.Context, ttl time.Duration) (l fence.Lease, lost <-chan struct{}, err error) {
	g, err := s.cli.Grant(ctx, int64(max(ttl/time.Second, 1)))
	if err != nil {
		return 0, nil, err
	}
	ch, err := s.cli.KeepAlive(ctx, g.ID)
	if err != nil {
		return 0, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range ch { // drained until the keepalive gives up or ctx ends
		}
	}()
	return fence.Lease(g.ID), done, nil
}

// ClaimMigration makes the holder of lease l the runner of migration id;
// false when another lease holds it.
func (s *Store) ClaimMigration(ctx context.Context, id string, l fence.Lease) (bool, error) {
	defer s.observe("claim_migration", time.Now())
	key, val := s.migRunnerKey(id), strconv.FormatInt(int64(l), 16)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val, clientv3.WithLease(clientv3.LeaseID(l)))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return false, err
	}
	if resp.Succeeded {
		return true, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	return len(kvs) > 0 && string(kvs[0].Value) == val, nil // ours already (a retried claim)
}

// ReleaseMigration gives up lease l's claim on migration id (its run ended).
func (s *Store) ReleaseMigration(ctx context.Context, id string, l fence.Lease) error {
	key := s.migRunnerKey(id)
	_, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), "=", strconv.FormatInt(int64(l), 16))).
		Then(clientv3.OpDelete(key)).Commit()
	return err
}

// UnrunMigrations returns the headers (no sessions) of the migrations no
// lease holds as runner, finished ones included: the caller picks the
// unfinished. Two reads, whatever the number of sessions, so every replica
// can look each second.
func (s *Store) UnrunMigrations(ctx context.Context) ([]*castv1.Migration, error) {
	heads, err := s.cli.Get(ctx, s.key("migrations")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	runners, err := s.cli.Get(ctx, s.key("migrunners")+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	run := make(map[string]bool, len(runners.Kvs))
	for _, kv := range runners.Kvs {
		run[lastPart(string(kv.Key))] = true
	}
	var out []*castv1.Migration
	for _, kv := range heads.Kvs {
		if run[lastPart(string(kv.Key))] {
			continue
		}
		m := &castv1.Migration{}
		if err := proto.Unmarshal(kv.Value, m); err != nil {
			return nil, errs.Internal(err, "decode migration")
		}
		out = append(out, m)
	}
	return out, nil
}
