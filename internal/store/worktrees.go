package store

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A migrating session's work tree (a git bundle) is relayed through etcd
// in chunks: any replica can take the source's upload and serve the
// destination's download, and a control plane restart loses nothing. The
// keys are deleted when the session's migration ends.

// workTreePage is how many chunks one read returns: chunks are as large
// as a node sends them (256 KiB today), so a few keep a reply small.
const workTreePage = 4

// PutWorkTreeChunk stores chunk i of a bundle.
func (s *Store) PutWorkTreeChunk(ctx context.Context, migID, sessionID string, i int, data []byte) error {
	return s.spend(len(data), func() error {
		_, err := s.cli.Put(ctx, s.workTreeKey(migID, sessionID, "chunks", fmt.Sprintf("%06d", i)), string(data))
		return err
	})
}

// PutWorkTreeRecord writes a named record (manifest, export_error, import).
func (s *Store) PutWorkTreeRecord(ctx context.Context, migID, sessionID, name, val string) error {
	_, err := s.cli.Put(ctx, s.workTreeKey(migID, sessionID, name), val)
	return err
}

// WorkTreeRecord reads a named record; ok is false when it is not there.
func (s *Store) WorkTreeRecord(ctx context.Context, migID, sessionID, name string) (string, bool, error) {
	resp, err := s.cli.Get(ctx, s.workTreeKey(migID, sessionID, name))
	if err != nil || len(resp.Kvs) == 0 {
		return "", false, err
	}
	return string(resp.Kvs[0].Value), true, nil
}

// ReadWorkTree calls fn with each chunk of the bundle in order.
func (s *Store) ReadWorkTree(ctx context.Context, migID, sessionID string, fn func([]byte) error) error {
	return scanPages(ctx, s.cli, s.workTreeKey(migID, sessionID, "chunks")+"/", workTreePage, func(kvs []*mvccpb.KeyValue) error {
		for _, kv := range kvs {
			if err := fn(kv.Value); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteWorkTree removes everything stored for the session's work tree,
// so a new upload starts clean.
func (s *Store) DeleteWorkTree(ctx context.Context, migID, sessionID string) error {
	_, err := s.cli.Delete(ctx, s.workTreeKey(migID, sessionID)+"/", clientv3.WithPrefix())
	return err
}

// nodeCmdTTL bounds how long a relayed command waits for its node; the
// migration resends what was not answered.
const nodeCmdTTL = 60

// SendNodeCommand records cmd for node; the dispatcher of the replica
// holding the node's stream sends it. cmd.Id must be set.
func (s *Store) SendNodeCommand(ctx context.Context, node string, cmd *castv1.Command) error {
	defer s.observe("send_node_command", time.Now())
	val, err := proto.Marshal(cmd)
	if err != nil {
		return errs.Internal(err, "encode command")
	}
	l, err := s.cli.Grant(ctx, nodeCmdTTL)
	if err != nil {
		return err
	}
	_, err = s.cli.Put(ctx, s.nodeCmdKey(node, cmd.Id), string(val), clientv3.WithLease(l.ID))
	return err
}
