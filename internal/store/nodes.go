package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/tick"
)

// connInfo is the nodeconn value.
type connInfo struct {
	Replica string    `json:"replica"`
	Since   time.Time `json:"since"`
	Seen    time.Time `json:"seen"`
}

// ErrLeaseExpired means the node's lease lapsed; register again.
var ErrLeaseExpired = errs.New(errs.KindUnavailable, errs.ReasonNodeLease, "node lease expired; reconnect")

// RegisterNode records n and marks it connected under a new lease of ttl.
func (s *Store) RegisterNode(ctx context.Context, n *castv1.Node, replica string, ttl time.Duration) (fence.Lease, error) {
	defer s.observe("register_node", time.Now())
	lg, err := s.cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return 0, err
	}
	now := time.Now()
	n = proto.Clone(n).(*castv1.Node)
	n.Connected = false // derived from the conn key on read
	n.AdminLabels = nil // an admin's, kept apart (nodelabels.go)
	n.ConnectTime = timestamppb.New(now)
	n.LastSeenTime = n.ConnectTime
	rec, err := proto.Marshal(n)
	if err != nil {
		return 0, errs.Internal(err, "encode node")
	}
	conn, _ := json.Marshal(connInfo{Replica: replica, Since: now, Seen: now})
	_, err = s.cli.Txn(ctx).Then(
		clientv3.OpPut(s.nodeKey(n.Name), string(rec)),
		clientv3.OpPut(s.connKey(n.Name), string(conn), clientv3.WithLease(clientv3.LeaseID(lg.ID))),
	).Commit()
	if err != nil {
		return 0, err
	}
	return fence.Lease(lg.ID), nil
}

// Heartbeat renews the node's lease: a lease renewal, which etcd's leader
// answers without a write to its log, so a fleet's heartbeats cost no
// etcd writes. ErrLeaseExpired means it lapsed.
func (s *Store) Heartbeat(ctx context.Context, l fence.Lease) error {
	defer s.observe("heartbeat", time.Now())
	_, err := s.cli.KeepAliveOnce(ctx, clientv3.LeaseID(l))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return ErrLeaseExpired
	}
	return err
}

// NodeSeen records now as the node's last heartbeat (last_seen_time) on
// its connection record: one etcd write, which the control plane makes
// every so often, not on every heartbeat. ErrLeaseExpired means the
// lease lapsed (a put under an expired lease fails).
func (s *Store) NodeSeen(ctx context.Context, name string, l fence.Lease, replica string, since time.Time) error {
	defer s.observe("node_seen", time.Now())
	now := time.Now()
	conn, _ := json.Marshal(connInfo{Replica: replica, Since: since, Seen: now})
	// The seen time also goes under a key of no lease, in the same txn
	// (still one write): the connection record goes with the lease when
	// the node goes down, and a down node's last_seen_time would fall back
	// to when it connected.
	_, err := s.cli.Txn(ctx).Then(
		clientv3.OpPut(s.connKey(name), string(conn), clientv3.WithLease(clientv3.LeaseID(l))),
		clientv3.OpPut(s.seenKey(name), now.UTC().Format(time.RFC3339Nano)),
	).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return ErrLeaseExpired
	}
	return err
}

// UpdateNodeAgents replaces the agents a connected node advertises (what
// changed since its hello: a login, an upgrade). Only the stream holding
// lease l may: a stale stream of a node that reconnected elsewhere gets
// ErrLeaseExpired and never overwrites the newer record.
func (s *Store) UpdateNodeAgents(ctx context.Context, name string, l fence.Lease, agents []*castv1.AgentInstall) error {
	defer s.observe("update_node_agents", time.Now())
	for range 8 { // another writer of the record between read and write: read again
		resp, err := s.cli.Get(ctx, s.nodeKey(name))
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return ErrLeaseExpired // forgotten (cast node rm): register again
		}
		n := &castv1.Node{}
		if err := proto.Unmarshal(resp.Kvs[0].Value, n); err != nil {
			return errs.Internal(err, "decode node")
		}
		n.Agents = agents
		rec, err := proto.Marshal(n)
		if err != nil {
			return errs.Internal(err, "encode node")
		}
		tr, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(s.nodeKey(name)), "=", resp.Kvs[0].ModRevision),
			clientv3.Compare(clientv3.LeaseValue(s.connKey(name)), "=", clientv3.LeaseID(l)),
		).Then(clientv3.OpPut(s.nodeKey(name), string(rec))).Commit()
		if err != nil {
			return err
		}
		if tr.Succeeded {
			return nil
		}
		if owner, err := s.cli.Get(ctx, s.connKey(name)); err != nil {
			return err
		} else if len(owner.Kvs) == 0 || owner.Kvs[0].Lease != int64(l) {
			return ErrLeaseExpired
		}
	}
	return errs.New(errs.KindAborted, errs.ReasonConflict, "node %s: its record kept changing; send its agents again", name)
}

// UnregisterNode marks the node down now by revoking its lease.
func (s *Store) UnregisterNode(ctx context.Context, l fence.Lease) error {
	_, err := s.cli.Revoke(ctx, clientv3.LeaseID(l))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return err
}

// ListNodes returns every node, connected or not, in name order.
func (s *Store) ListNodes(ctx context.Context) ([]*castv1.Node, error) {
	defer s.observe("list_nodes", time.Now())
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.key("nodes")+"/", clientv3.WithPrefix()),
		clientv3.OpGet(s.key("nodeconn")+"/", clientv3.WithPrefix()),
		clientv3.OpGet(s.key("nodelabels")+"/", clientv3.WithPrefix()),
		clientv3.OpGet(s.key("nodeseen")+"/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, err
	}
	seen := map[string]time.Time{}
	for _, kv := range resp.Responses[3].GetResponseRange().Kvs {
		if t, err := time.Parse(time.RFC3339Nano, string(kv.Value)); err == nil {
			seen[lastPart(string(kv.Key))] = t
		}
	}
	labels := map[string]map[string]string{}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		l, err := decodeLabels([]*mvccpb.KeyValue{kv})
		if err != nil {
			return nil, err
		}
		labels[lastPart(string(kv.Key))] = l
	}
	conns := map[string]connInfo{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var ci connInfo
		_ = json.Unmarshal(kv.Value, &ci)
		conns[lastPart(string(kv.Key))] = ci
	}
	var out []*castv1.Node
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		n := &castv1.Node{}
		if err := proto.Unmarshal(kv.Value, n); err != nil {
			return nil, errs.Internal(err, "decode node")
		}
		n.AdminLabels = labels[n.Name] // never what a node's hello said
		if ci, ok := conns[n.Name]; ok {
			n.Connected = true
			n.LastSeenTime = timestamppb.New(ci.Seen)
		} else if t, ok := seen[n.Name]; ok && t.After(n.GetLastSeenTime().AsTime()) {
			n.LastSeenTime = timestamppb.New(t) // down: its last recorded heartbeat
		}
		out = append(out, n)
	}
	return out, nil
}

// WatchNodesDown calls down(name, rev) each time a node's liveness key goes
// away (lease lapsed or revoked) at revision rev, until ctx ends.
func (s *Store) WatchNodesDown(ctx context.Context, down func(name string, rev int64)) {
	for ctx.Err() == nil {
		err := s.watchNodesDown(ctx, down)
		if ctx.Err() != nil {
			return
		}
		// Compacted or refused: the liveness keys deleted meanwhile are
		// gone from etcd's history, so watch again from now.
		s.lg.Warn("node liveness watch ended; watching again from now", zap.Error(err))
		tick.Sleep(ctx, time.Second)
	}
}

func (s *Store) watchNodesDown(ctx context.Context, down func(name string, rev int64)) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for b := range s.follow(wctx, s.key("nodeconn")+"/", 0, clientv3.WithPrefix(), clientv3.WithFilterPut()) {
		if b.Err != nil {
			return b.Err
		}
		for _, ev := range b.Events {
			down(lastPart(string(ev.Kv.Key)), ev.Kv.ModRevision)
		}
	}
	return ctx.Err()
}

// SessionsOwnedBy lists the sessions whose owner is node, with tokens.
func (s *Store) SessionsOwnedBy(ctx context.Context, node string) ([]fence.OwnedSession, error) {
	var out []fence.OwnedSession
	err := s.EachOwnedSession(ctx, node, func(page []fence.OwnedSession) error {
		out = append(out, page...)
		return nil
	})
	return out, err
}

// DeleteNode forgets a node that is gone: its record, queued commands and
// credential grants, in one txn compared against what was checked (not
// connected, the record and its session index unchanged). A node that
// still owns sessions is refused unless force; then the sessions stay,
// owned by the name, for a drain to move.
func (s *Store) DeleteNode(ctx context.Context, name string, force bool) (int, error) {
	defer s.observe("delete_node", time.Now())
	owned := s.key("nodesessions", name) + "/"
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.nodeKey(name)), clientv3.OpGet(s.connKey(name)),
		clientv3.OpGet(owned, clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return 0, err
	}
	rec := resp.Responses[0].GetResponseRange().Kvs
	if len(rec) == 0 {
		return 0, errs.NotFound("node %s is not registered; `cast nodes` lists nodes", name).With("node", name)
	}
	if len(resp.Responses[1].GetResponseRange().Kvs) > 0 {
		return 0, errs.New(errs.KindFailedPrecondition, errs.ReasonNodeConnected,
			"node %s is connected; stop its daemon first (or `cast drain %s` to move its sessions)", name, name).With("node", name)
	}
	sessions := int(resp.Responses[2].GetResponseRange().Count)
	if sessions > 0 && !force {
		return 0, errs.New(errs.KindFailedPrecondition, errs.ReasonNodeBusy,
			"node %s still owns %d session(s); `cast drain %s --skip-worktree` moves them, or `cast node rm %s --force` forgets the node and leaves them for a later drain",
			name, sessions, name, name).With("node", name)
	}
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(s.nodeKey(name)), "=", rec[0].ModRevision),
		clientv3.Compare(clientv3.CreateRevision(s.connKey(name)), "=", 0),
	}
	if sessions == 0 {
		// Nothing was placed on it since the count.
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(owned).WithPrefix(), "=", 0))
	}
	txn, err := s.cli.Txn(ctx).If(cmps...).Then(
		clientv3.OpDelete(s.nodeKey(name)),
		clientv3.OpDelete(s.nodeLabelsKey(name)),
		clientv3.OpDelete(s.seenKey(name)),
		clientv3.OpDelete(s.key("nodecmds", name)+"/", clientv3.WithPrefix()),
		clientv3.OpDelete(s.key("credgrants", name)+"/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return 0, err
	}
	if !txn.Succeeded {
		return 0, errs.New(errs.KindAborted, errs.ReasonConflict, "node %s changed while it was being removed (it reconnected, or got a session); look at `cast nodes` and retry", name).With("node", name)
	}
	return sessions, nil
}
