package store

import (
	"context"
	"encoding/hex"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// SweepSegments deletes the segments no index entry points at that were
// written before before (orphans of moves that crashed or lost their txn,
// and segments of purged sessions), and returns how many it deleted.
//
// It lists the objects before it reads the index: a move commits only a
// segment it wrote less than OrphanGrace/2 ago, so an object old enough to
// be listed here is never pointed at by a txn that commits after the read.
func (s *Store) SweepSegments(ctx context.Context, before time.Time) (int, error) {
	if s.objs == nil {
		return 0, nil
	}
	defer s.observe("sweep_segments", time.Now())
	var old []string
	err := s.objs.List(ctx, segObjPrefix, func(key string, modified time.Time) error {
		if modified.Before(before) {
			old = append(old, key)
		}
		return nil
	})
	if err != nil || len(old) == 0 {
		return 0, err
	}
	live, err := s.liveSegments(ctx)
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, key := range old {
		if live[strings.TrimPrefix(key, segObjPrefix)] {
			continue
		}
		if err := s.objs.Delete(ctx, key); err != nil {
			return deleted, err
		}
		deleted++
		s.m.OrphanSegmentsSwept.Inc()
	}
	return deleted, nil
}

// liveSegments reads every index entry: the hex digests they point at.
func (s *Store) liveSegments(ctx context.Context) (map[string]bool, error) {
	live := map[string]bool{}
	root := s.key("segs") + "/"
	end := clientv3.GetPrefixRangeEnd(root)
	for from := root; ; {
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(1000))
		if err != nil {
			return nil, err
		}
		for _, kv := range resp.Kvs {
			r, err := parseSegRef(kv.Value)
			if err != nil {
				return nil, err
			}
			live[hex.EncodeToString(r.digest[:])] = true
		}
		if !resp.More {
			return live, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
