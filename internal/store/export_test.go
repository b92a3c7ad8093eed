package store

import (
	"context"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// SetAfterChunks runs fn in every append after its chunks are written and
// before it is committed, so a test can change the world in between.
func SetAfterChunks(s *Store, fn func()) { s.afterChunks = fn }

// SetBeforeTxn runs fn in every group commit round between its reads and
// its write txn (and before each try again), so a test can move a
// session's keys in between.
func SetBeforeTxn(s *Store, fn func()) { s.beforeTxn = fn }

// AppendTxns is how many txns the group commit has sent (reads and writes).
func AppendTxns(s *Store) int64 { return s.commit.txns.Load() }

// QueuedAppends is how many appends wait for a group commit round.
func QueuedAppends(s *Store) int {
	s.commit.mu.Lock()
	defer s.commit.mu.Unlock()
	n := 0
	for _, q := range s.commit.queues {
		n += len(q)
	}
	return n
}

// CommitLeaders is how many group commit rounds are being led (in flight,
// or about to take their appends).
func CommitLeaders(s *Store) int {
	s.commit.mu.Lock()
	defer s.commit.mu.Unlock()
	return s.commit.leaders
}

// AppendConflicts is how many times a session's batch was charged a try
// because its keys moved under a group commit txn.
func AppendConflicts(s *Store) float64 {
	var m dto.Metric
	if err := s.m.TxnConflicts.WithLabelValues("append").Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// DecodeMessage decodes an envelope read at rev, as the watches do.
func DecodeMessage(ctx context.Context, s *Store, sessionID string, val []byte, rev int64) (*castv1.Message, error) {
	return s.decodeMessage(ctx, sessionID, val, rev)
}

// Follow is follow for a test: it calls fn with the value of each put to
// key (under the store's prefix) from rev on, until fn returns false, and
// returns the error the watch ended with (nil when fn stopped it).
func Follow(ctx context.Context, s *Store, key string, rev int64, fn func(val string) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for b := range s.follow(ctx, s.key(key), rev) {
		if b.Err != nil {
			return b.Err
		}
		for _, ev := range b.Events {
			if !fn(string(ev.Kv.Value)) {
				return nil
			}
		}
	}
	return ctx.Err()
}

// Put writes val at key under the store's prefix and returns its revision.
func Put(ctx context.Context, s *Store, key, val string) (int64, error) {
	resp, err := s.cli.Put(ctx, s.key(key), val)
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// ScanPages is scanPages over the store's client for a test: prefix is
// under the store's prefix, and fn sees each page's keys (without the
// store's prefix) and values.
func ScanPages(ctx context.Context, s *Store, prefix string, size int64, keysOnly bool, fn func(keys, vals []string) error) error {
	var opts []clientv3.OpOption
	if keysOnly {
		opts = append(opts, clientv3.WithKeysOnly())
	}
	return scanPages(ctx, s.cli, s.key(prefix), size, func(kvs []*mvccpb.KeyValue) error {
		keys, vals := make([]string, len(kvs)), make([]string, len(kvs))
		for i, kv := range kvs {
			keys[i], vals[i] = strings.TrimPrefix(string(kv.Key), s.cfg.Prefix), string(kv.Value)
		}
		return fn(keys, vals)
	}, opts...)
}

// ScanPrefix is scanPrefix over the store's client: fn sees each key
// under prefix (under the store's prefix), without the store's prefix.
func ScanPrefix(ctx context.Context, s *Store, prefix string, fn func(key string) error) error {
	return scanPrefix(ctx, s.cli, s.key(prefix), func(kv *mvccpb.KeyValue) error {
		return fn(strings.TrimPrefix(string(kv.Key), s.cfg.Prefix))
	})
}

// ScanPage is how many keys a whole-prefix scan reads at a time.
const ScanPage = scanPage

// PutKeys writes val at each of keys (under the store's prefix), many
// to a txn, so a test can fill a prefix past a scan page quickly.
func PutKeys(ctx context.Context, s *Store, keys []string, val string) error {
	for len(keys) > 0 {
		n := min(len(keys), 100)
		ops := make([]clientv3.Op, n)
		for i, k := range keys[:n] {
			ops[i] = clientv3.OpPut(s.key(k), val)
		}
		if _, err := s.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}
