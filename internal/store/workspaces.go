package store

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A thread's workspace (its folder on the owner node) changes when the
// owner reports a move (`cast workspace set`, `cast worktree rm`); the
// replica that asked waits for the node's answer under wsanswers/, which
// any replica may have stored.

// Workspace is where an owner moved a session.
type Workspace struct {
	Cwd, WorktreeBranch, Checkout string
}

// SetWorkspace records a session's new folder for its owner (fenced by g
// like ReportTurn) and refuses while a migration fences the session: the
// move would race the work tree travelling.
func (s *Store) SetWorkspace(ctx context.Context, sessionID string, g fence.Guard, w Workspace) (*castv1.Session, error) {
	defer s.observe("set_workspace", time.Now())
	return s.mutate(ctx, sessionID, g, true, func(sess *castv1.Session) error {
		sess.Cwd, sess.WorktreeBranch, sess.Checkout = w.Cwd, w.WorktreeBranch, w.Checkout
		return nil
	})
}

// wsAnswerTTL bounds how long an answer waits for the replica that asked.
const wsAnswerTTL = 300

// PutWorkspaceAnswer stores node's answer to request id (leased).
func (s *Store) PutWorkspaceAnswer(ctx context.Context, node, id string, answer []byte) error {
	defer s.observe("put_workspace_answer", time.Now())
	l, err := s.cli.Grant(ctx, wsAnswerTTL)
	if err != nil {
		return err
	}
	_, err = s.cli.Put(ctx, s.wsAnswerKey(node, id), string(answer), clientv3.WithLease(l.ID))
	return err
}

// WaitWorkspaceAnswer returns node's answer to request id once stored, or
// ctx's error.
func (s *Store) WaitWorkspaceAnswer(ctx context.Context, node, id string) ([]byte, error) {
	key := s.wsAnswerKey(node, id)
	for {
		resp, err := s.cli.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) > 0 {
			return resp.Kvs[0].Value, nil
		}
		if answer, ok := s.watchPut(ctx, key, resp.Header.Revision+1); ok {
			return answer, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The watch ended (compaction): look again.
	}
}

// watchPut returns the value of the first put of key from rev on, or
// false when the watch ends first.
func (s *Store) watchPut(ctx context.Context, key string, rev int64) ([]byte, bool) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for b := range s.follow(wctx, key, rev) {
		for _, ev := range b.Events {
			if ev.Type == clientv3.EventTypePut {
				return ev.Kv.Value, true
			}
		}
	}
	return nil, false
}
