package store

import (
	"context"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// moveParts moves, each alone, the large messages (images, big tool
// outputs: at least PartBytes, so stored in chunks) with seq <= cut that
// are still in etcd, hot tail or not.
func (s *Store) moveParts(ctx context.Context, id string, cut int64) (int, error) {
	seqs, err := s.largeParts(ctx, id, cut)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, seq := range seqs {
		n, err := s.moveRun(ctx, id, seq, seq)
		moved += n
		if err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// largeParts finds them through the session's chunk keys (one set per
// append attempt of a chunked message), the client id records naming
// their seqs, and the envelopes' sizes.
func (s *Store) largeParts(ctx context.Context, id string, cut int64) ([]int64, error) {
	root := s.key("chunks", id) + "/"
	resp, err := s.cli.Get(ctx, root, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) == 0 {
		return nil, err
	}
	cids := map[string]bool{}
	for _, kv := range resp.Kvs {
		cid, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), root), "/")
		cids[cid] = true
	}
	var out []int64
	for cid := range cids {
		seq, err := s.partSeq(ctx, id, cid)
		if err != nil {
			return nil, err
		}
		if seq > 0 && seq <= cut {
			out = append(out, seq)
		}
	}
	slices.Sort(out)
	return out, nil
}

// partSeq returns the seq of client id cid when its message is in etcd
// and at least PartBytes (0 otherwise: an orphan attempt, or small).
func (s *Store) partSeq(ctx context.Context, id, cid string) (int64, error) {
	resp, err := s.cli.Get(ctx, s.cidKey(id, cid))
	if err != nil || len(resp.Kvs) == 0 {
		return 0, err
	}
	rec, err := parseCidRecord(resp.Kvs[0].Value)
	if err != nil {
		return 0, err
	}
	env, err := s.cli.Get(ctx, s.msgKey(id, rec.seq))
	if err != nil || len(env.Kvs) == 0 {
		return 0, err
	}
	size, err := envelopeSize(env.Kvs[0].Value)
	if err != nil || size < s.tier.cfg.PartBytes {
		return 0, err
	}
	return rec.seq, nil
}
