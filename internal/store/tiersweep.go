package store

import (
	"context"
	"encoding/hex"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
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
	err := scanPrefix(ctx, s.cli, s.key("segs")+"/", func(kv *mvccpb.KeyValue) error {
		r, err := parseSegRef(kv.Value)
		if err != nil {
			return err
		}
		live[hex.EncodeToString(r.digest[:])] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	return live, nil
}
