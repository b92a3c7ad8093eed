package store

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.uber.org/zap"
)

// deleteSegments deletes the objects of a purged session's segments (segs
// are its index entries, read by the txn that deleted them). A segment
// belongs to one session (its nonce makes every object distinct), so no
// other index entry names it. Best effort: what fails to delete is an
// orphan, and SweepSegments deletes it once it is OrphanGrace old.
func (s *Store) deleteSegments(ctx context.Context, id string, segs []*mvccpb.KeyValue) {
	if s.objs == nil {
		return
	}
	for _, kv := range segs {
		ref, err := parseSegRef(kv.Value)
		if err == nil {
			err = s.objs.Delete(ctx, segObjKey(ref.digest))
		}
		if err != nil {
			s.lg.Warn("deleting a purged session's segment failed; the orphan sweep deletes it later",
				zap.String("session", id), zap.String("key", string(kv.Key)), zap.Error(err))
			continue
		}
		s.m.SegmentsPurged.Inc()
	}
}
