package store

import (
	"context"
	"encoding/json"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
)

// getJSON reads the JSON record at key: found is false (and v zero) when
// there is none, rev is the key's ModRevision, and a record that does not
// decode is an internal error naming what it is.
func getJSON[T any](ctx context.Context, kv clientv3.KV, key, what string) (v T, rev int64, found bool, err error) {
	resp, err := kv.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return v, 0, false, err
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &v); err != nil {
		var zero T
		return zero, 0, false, errs.Internal(err, "decode "+what)
	}
	return v, resp.Kvs[0].ModRevision, true, nil
}

// decodeProtos decodes each record of a range read as a P, in order; a
// record that does not decode is an internal error naming what it is.
func decodeProtos[T any, P interface {
	*T
	proto.Message
}](kvs []*mvccpb.KeyValue, what string) ([]P, error) {
	out := make([]P, 0, len(kvs))
	for _, kv := range kvs {
		m := P(new(T))
		if err := proto.Unmarshal(kv.Value, m); err != nil {
			return nil, errs.Internal(err, "decode "+what)
		}
		out = append(out, m)
	}
	return out, nil
}
