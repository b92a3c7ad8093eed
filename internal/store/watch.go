package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Event is one change to a session: exactly one field is set.
type Event struct {
	Message *castv1.Message
	Session *castv1.Session
}

// Watch calls fn with the session as it is, then (when startSeq > 0) every
// message from startSeq on, then each change as it happens, until ctx ends
// or fn fails. The replay and the live watch meet at one revision, so no
// message is missed or sent twice.
func (s *Store) Watch(ctx context.Context, sessionID string, startSeq int64, fn func(Event) error) error {
	_, rev, err := s.Replay(ctx, sessionID, startSeq, fn)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgCh := s.follow(wctx, s.msgPrefix(sessionID), rev+1, clientv3.WithPrefix())
	sessCh := s.follow(wctx, s.sessionKey(sessionID), rev+1)
	ownCh := s.follow(wctx, s.ownerKey(sessionID), rev+1)
	for {
		var b watchBatch
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case b, ok = <-msgCh:
		case b, ok = <-sessCh:
		case b, ok = <-ownCh:
		}
		if !ok {
			return nil // ctx ended
		}
		if b.Err != nil {
			return watchEnded(b.Err)
		}
		if err := s.emit(ctx, sessionID, b.Events, fn); err != nil {
			return err
		}
	}
}

// watchEnded is the error of a session watch that follow could not keep
// open, for its client to watch again from the next seq.
func watchEnded(err error) error {
	if errors.Is(err, rpctypes.ErrCompacted) {
		return errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "watch fell behind the store's history; watch again with start_seq")
	}
	return errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "watch interrupted (%v); watch again with start_seq", err)
}

func (s *Store) emit(ctx context.Context, sessionID string, events []*clientv3.Event, fn func(Event) error) error {
	sessionChanged := false
	for _, ev := range events {
		if ev.Type != clientv3.EventTypePut {
			continue
		}
		key := string(ev.Kv.Key)
		if len(key) > len(s.msgPrefix(sessionID)) && key[:len(s.msgPrefix(sessionID))] == s.msgPrefix(sessionID) {
			m, err := s.decodeKV(ctx, sessionID, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision)
			if err != nil {
				return errs.Internal(err, "decode watched message")
			}
			if err := fn(Event{Message: m}); err != nil {
				return err
			}
			continue
		}
		sessionChanged = true
	}
	if !sessionChanged {
		return nil
	}
	sess, err := s.GetSession(ctx, sessionID)
	if err != nil {
		return err
	}
	return fn(Event{Session: sess})
}

// Change is one event of WatchDispatch.
type Change struct {
	Owner   *fence.OwnerChange // a session got (or changed) its owner
	Message *castv1.Message    // a user message was appended
	Session string             // the session a Message or Interrupt belongs to
	// Op is a request for the owner node: OpInterrupt, OpAbandon or OpRefresh.
	Op string
	// Agent is the agent an OpInterrupt stops only a turn of (a switch's,
	// RequestInterrupt); "" any.
	Agent string
	// NodeCmd is a command relayed to Node (SendNodeCommand).
	NodeCmd *castv1.Command
	Node    string
	// Purged: Session's owner record was deleted (PurgeSession), so the
	// session has no owner to send anything to any more.
	Purged bool
}

// Owners returns every session's owner with its token, and the revision
// they were read at.
func (s *Store) Owners(ctx context.Context) ([]fence.OwnerChange, int64, error) {
	resp, err := s.cli.Get(ctx, s.key("owners")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	out := make([]fence.OwnerChange, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, fence.OwnerChange{Session: lastPart(string(kv.Key)), Node: string(kv.Value), Token: kv.ModRevision})
	}
	return out, resp.Header.Revision, nil
}

// WatchDispatch follows owner changes, appended messages and interrupt
// requests from rev on, in revision order (one watch over the key range
// msgs/ .. owners/ that holds all three), so an owner change is always seen
// before the messages after it. Of messages it reports only user ones, the
// only ones anything is dispatched for: every replica sees every append, so
// the others are not decoded (an inline one's kind is read from its bytes).
// Of deletions it reports only an owner
// record's (Change.Purged): a follower keeping owners by session would
// otherwise keep every purged session's for as long as it follows.
func (s *Store) WatchDispatch(ctx context.Context, rev int64, fn func(Change)) error {
	from, to := s.key("msgs")+"/", s.key("owners")+"0" // "0" sorts right after "/"
	return s.followRange(ctx, from, to, rev, true, func(events []*clientv3.Event) {
		for _, ev := range events {
			key := string(ev.Kv.Key)
			if ev.Type == clientv3.EventTypeDelete {
				// A purge's other deletions (its messages, ops) and spent
				// node commands carry nothing to dispatch.
				if strings.HasPrefix(key, s.key("owners")+"/") {
					fn(Change{Session: lastPart(key), Purged: true})
				}
				continue
			}
			switch {
			case strings.HasPrefix(key, s.key("nodecmds")+"/"):
				node, _, _ := strings.Cut(strings.TrimPrefix(key, s.key("nodecmds")+"/"), "/")
				cmd := &castv1.Command{}
				if err := proto.Unmarshal(ev.Kv.Value, cmd); err != nil {
					s.lg.Warn("undecodable node command", zap.String("key", key), zap.Error(err))
					continue
				}
				fn(Change{NodeCmd: cmd, Node: node})
			case strings.HasPrefix(key, s.key("ops")+"/"):
				sid, op, _ := strings.Cut(strings.TrimPrefix(key, s.key("ops")+"/"), "/")
				_, agent, _ := strings.Cut(string(ev.Kv.Value), opAgent)
				fn(Change{Op: op, Session: sid, Agent: agent})
			case strings.HasPrefix(key, s.key("owners")+"/"):
				fn(Change{Owner: &fence.OwnerChange{Session: lastPart(key), Node: string(ev.Kv.Value), Token: ev.Kv.ModRevision}})
			case strings.HasPrefix(key, from):
				if kind, ok := inlineKind(ev.Kv.Value); ok && kind != castv1.MessageKind_MESSAGE_KIND_USER {
					continue // most of them (a node's rows): not decoded
				}
				rest := strings.TrimPrefix(key, from)
				sid, _, _ := strings.Cut(rest, "/")
				m, err := s.decodeKV(ctx, sid, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision)
				if err != nil {
					s.lg.Warn("undecodable message in dispatch watch", zap.String("key", key), zap.Error(err))
					continue
				}
				if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER {
					fn(Change{Message: m, Session: sid})
				}
			}
		}
	})
}

// RequestOp records a request for the session's owner node (OpInterrupt,
// OpRefresh); the dispatcher of the replica holding the owner's stream acts
// on it. The key expires by itself.
func (s *Store) RequestOp(ctx context.Context, sessionID, op string) error {
	return s.requestOp(ctx, sessionID, op, "")
}

// RequestInterrupt records an OpInterrupt that stops only a turn running
// agent: a switch's names the agent it switched from, whose turn may have
// ended before the interrupt reached the node; the turn then running or
// about to is the new agent's, not the one the switch meant.
func (s *Store) RequestInterrupt(ctx context.Context, sessionID, agent string) error {
	return s.requestOp(ctx, sessionID, fence.OpInterrupt, agent)
}

// opAgent follows an op's time in its value when it names an agent
// (RequestInterrupt); a replica that does not know it reads only the key,
// and sends the interrupt naming none.
const opAgent = " agent="

func (s *Store) requestOp(ctx context.Context, sessionID, op, agent string) error {
	if _, _, err := s.Owner(ctx, sessionID); err != nil {
		return err
	}
	l, err := s.cli.Grant(ctx, 30)
	if err != nil {
		return err
	}
	v := time.Now().UTC().Format(time.RFC3339Nano)
	if agent != "" {
		v += opAgent + agent
	}
	_, err = s.cli.Put(ctx, s.key("ops", sessionID, op), v, clientv3.WithLease(l.ID))
	return err
}

// NodeConnected reports whether the node's liveness key exists.
func (s *Store) NodeConnected(ctx context.Context, node string) (bool, error) {
	resp, err := s.cli.Get(ctx, s.connKey(node), clientv3.WithCountOnly())
	if err != nil {
		return false, err
	}
	return resp.Count > 0, nil
}
