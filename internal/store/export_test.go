package store

import (
	"context"

	dto "github.com/prometheus/client_model/go"

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
