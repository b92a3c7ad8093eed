package store

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// scanPage is how many keys one read of a whole-prefix scan returns: large
// enough that a scan of the store's biggest index costs few round trips,
// small enough that no single reply nears etcd's message size.
const scanPage = 1000

// scanPages reads every key under prefix, in key order, size keys per
// read, and calls fn with each non-empty page; an error from fn (or from
// etcd) ends the scan and is returned. opts add to each read (keys only,
// a revision). Each page is its own read unless opts pin a revision: a
// key written during the scan may or may not be seen, none is seen twice.
func scanPages(ctx context.Context, kv clientv3.KV, prefix string, size int64, fn func([]*mvccpb.KeyValue) error, opts ...clientv3.OpOption) error {
	end := clientv3.GetPrefixRangeEnd(prefix)
	opts = append([]clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(size)}, opts...)
	for from := prefix; ; {
		resp, err := kv.Get(ctx, from, opts...)
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		if err := fn(resp.Kvs); err != nil {
			return err
		}
		if !resp.More {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// scanPrefix calls fn with every key under prefix in key order, read
// scanPage keys at a time (see scanPages).
func scanPrefix(ctx context.Context, kv clientv3.KV, prefix string, fn func(*mvccpb.KeyValue) error, opts ...clientv3.OpOption) error {
	return scanPages(ctx, kv, prefix, scanPage, func(kvs []*mvccpb.KeyValue) error {
		for _, kv := range kvs {
			if err := fn(kv); err != nil {
				return err
			}
		}
		return nil
	}, opts...)
}
