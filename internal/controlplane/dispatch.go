package controlplane

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/tick"
)

// dispatcher turns store changes into node commands: a new owner gets
// AssignSession, a new user message (not history: ids.History) goes to its
// owner as DeliverMessages.
// It works from an etcd watch, not from the handler that made the change,
// so with several replicas over one etcd the replica holding a node's
// stream delivers whatever replica took the request. Delivery is
// at-least-once; the node makes it exactly-once by seq.
type dispatcher struct {
	s  *Server
	lg *zap.Logger

	mu     sync.Mutex
	owners map[string]fence.OwnerChange // session -> owner
}

func (d *dispatcher) run(ctx context.Context) {
	for ctx.Err() == nil {
		owners, rev, err := d.s.store.Owners(ctx)
		if err == nil {
			d.mu.Lock()
			d.owners = make(map[string]fence.OwnerChange, len(owners))
			for _, o := range owners {
				d.owners[o.Session] = o
			}
			d.mu.Unlock()
			err = d.s.store.WatchDispatch(ctx, rev+1, d.apply)
		}
		if ctx.Err() != nil {
			return
		}
		// Compaction or a lost leader broke the watch. Nodes re-pull what
		// they missed when assigned, so reloading from now is enough.
		d.lg.Warn("dispatch watch ended; restarting", zap.Error(err))
		tick.Sleep(ctx, time.Second)
	}
}

func (d *dispatcher) apply(c store.Change) {
	if c.NodeCmd != nil {
		d.s.hub.relay(c.Node, c.NodeCmd)
		return
	}
	if c.Purged {
		d.mu.Lock()
		delete(d.owners, c.Session) // the purge itself sent the owner its release
		d.mu.Unlock()
		return
	}
	if o := c.Owner; o != nil {
		d.mu.Lock()
		prev, had := d.owners[o.Session]
		d.owners[o.Session] = *o
		d.mu.Unlock()
		if had && prev.Node != o.Node {
			// Moved: the old owner's token is dead; it stops the agent.
			d.s.hub.release(prev.Node, o.Session, o.Node)
		}
		sess, err := d.s.store.GetSession(context.Background(), o.Session)
		if err != nil {
			d.lg.Warn("read assigned session failed", zap.String("session", o.Session), zap.Error(err))
			return
		}
		d.s.hub.assign(sess, o.Token)
		return
	}
	if c.Op != "" {
		d.mu.Lock()
		o, ok := d.owners[c.Session]
		d.mu.Unlock()
		if !ok {
			return
		}
		switch c.Op {
		case fence.OpInterrupt:
			d.s.hub.interrupt(o.Node, c.Session, false, c.Agent)
		case fence.OpAbandon:
			d.s.hub.interrupt(o.Node, c.Session, true, "")
		case fence.OpRefresh:
			if sess, err := d.s.store.GetSession(context.Background(), c.Session); err == nil {
				d.s.hub.assign(sess, o.Token)
			}
		}
		return
	}
	if c.Message.Kind != castv1.MessageKind_MESSAGE_KIND_USER || ids.History(c.Message.ClientId) {
		return // rows a node synced or adopted are history: no node runs them
	}
	d.mu.Lock()
	o, ok := d.owners[c.Session]
	d.mu.Unlock()
	if ok {
		d.s.hub.deliver(o.Node, c.Session, o.Token, []*castv1.Message{c.Message})
	}
}
