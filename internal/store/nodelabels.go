package store

import (
	"context"
	"encoding/json"
	"maps"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/errs"
)

// A node's admin labels (`cast node label`) live apart from its record,
// which the node rewrites at every hello: a node can report its own
// labels (--label) but never set these, and they outlast its reconnects.
// They go with the node (DeleteNode), so a new machine joining under a
// forgotten name inherits no mark.

func (s *Store) nodeLabelsKey(n string) string { return s.key("nodelabels", n) }

// MaxNodeLabels bounds a node's admin labels, all calls together: each
// LabelNode call is bounded, and without this their sum grew one value
// until etcd refused it (and every node listing carried them).
const MaxNodeLabels = 64

// NodeLabels returns node's admin labels (empty when none).
func (s *Store) NodeLabels(ctx context.Context, node string) (map[string]string, error) {
	resp, err := s.cli.Get(ctx, s.nodeLabelsKey(node))
	if err != nil {
		return nil, err
	}
	return decodeLabels(resp.Kvs)
}

func decodeLabels(kvs []*mvccpb.KeyValue) (map[string]string, error) {
	out := map[string]string{}
	if len(kvs) == 0 {
		return out, nil
	}
	if err := json.Unmarshal(kvs[0].Value, &out); err != nil {
		return nil, errs.Internal(err, "decode node labels")
	}
	return out, nil
}

// LabelNode sets and removes admin labels of a registered node and returns
// them all, in one txn compared against the node record and the labels read.
func (s *Store) LabelNode(ctx context.Context, node string, set map[string]string, remove []string) (map[string]string, error) {
	defer s.observe("label_node", time.Now())
	k := s.nodeLabelsKey(node)
	for range 8 { // another admin's change between read and write: again
		resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.nodeKey(node), clientv3.WithCountOnly()), clientv3.OpGet(k)).Commit()
		if err != nil {
			return nil, err
		}
		if resp.Responses[0].GetResponseRange().Count == 0 {
			return nil, errs.NotFound("node %s is not registered; `cast nodes` lists nodes", node).With("node", node)
		}
		kvs := resp.Responses[1].GetResponseRange().Kvs
		labels, err := decodeLabels(kvs)
		if err != nil {
			return nil, err
		}
		var rev int64
		if len(kvs) > 0 {
			rev = kvs[0].ModRevision
		}
		had := len(labels)
		maps.Copy(labels, set)
		for _, r := range remove {
			delete(labels, r)
		}
		if n := len(labels); n > MaxNodeLabels && n > had { // a node over it from before may still shed some
			return nil, errs.Invalid("node %s would have %d admin labels; at most %d: remove some (KEY-) first", node, n, MaxNodeLabels).
				With("field", "set").With("node", node)
		}
		val, _ := json.Marshal(labels)
		tr, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(k), "=", rev),
			clientv3.Compare(clientv3.CreateRevision(s.nodeKey(node)), ">", 0),
		).Then(clientv3.OpPut(k, string(val))).Commit()
		if err != nil {
			return nil, err
		}
		if tr.Succeeded {
			return labels, nil
		}
	}
	return nil, errs.New(errs.KindAborted, errs.ReasonConflict, "the labels of node %s kept changing; look at `cast nodes` and retry", node).With("node", node)
}
