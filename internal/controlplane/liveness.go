package controlplane

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/tick"
)

// liveness ends the turns of nodes that went away. A node killed, crashed
// or cut off mid-turn cannot report its turn's end, and its sessions would
// show running with no process behind them. When a node goes down (its
// liveness key is gone: lease lapsed, or its stream ended), the replica
// waits a grace of half a lease for it to come back, since a stream also
// ends for planned reasons (a certificate renewal, a replica stopping),
// then marks every session the node owns that still shows a turn failed,
// with a reason that says what happened and what to do. A node that came
// back first, or that later reports its turn's real state, wins
// (store.FailTurnsOfDownNode). Down events come from the etcd watch; a
// look at the node list every lease TTL catches what a broken watch
// missed and, at a replica's start, nodes that went down while no replica
// was watching.
type liveness struct {
	s     *Server
	lg    *zap.Logger
	grace time.Duration
}

func newLiveness(s *Server) *liveness {
	return &liveness{s: s, lg: s.lg.Named("liveness"), grace: s.cfg.LeaseTTL / 2}
}

func (l *liveness) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	check := func(node string, downRev int64) { // once the grace has passed
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(l.grace):
			}
			l.endTurns(ctx, node, downRev)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.s.store.WatchNodesDown(ctx, func(node string, rev int64) {
			l.s.m.HeartbeatExpired.Inc()
			l.lg.Info("node marked down", zap.String("node", node))
			check(node, rev)
		})
	}()
	l.poll(ctx, check)
}

// poll calls check for each node that is down and was up at the last look
// (at the first look: every node that is down). It does not know when the
// node went down (revision 0), so only the watch's checks tell a node
// that came back and went down again meanwhile.
func (l *liveness) poll(ctx context.Context, check func(string, int64)) {
	var up map[string]bool // nil until a look succeeded
	tick.Loop{Every: l.s.cfg.LeaseTTL, First: true}.Run(ctx, func() bool {
		nodes, err := l.s.store.ListNodes(ctx)
		if err != nil {
			return true
		}
		now := make(map[string]bool, len(nodes))
		for _, n := range nodes {
			switch {
			case n.Connected:
				now[n.Name] = true
			case up == nil || up[n.Name]:
				check(n.Name, 0)
			}
		}
		up = now
		return true
	})
}

// endTurns marks failed the turns node still shows, unless it is back or
// was back after downRev.
func (l *liveness) endTurns(ctx context.Context, node string, downRev int64) {
	reason := fmt.Sprintf("node %s stopped answering during this turn (its connection to the control plane ended); "+
		"the turn runs again when %s is back, or `cast drain %s --skip-worktree` moves its sessions to another node", node, node, node)
	failed, err := l.s.store.FailTurnsOfDownNode(ctx, node, downRev, reason)
	if err != nil {
		if ctx.Err() == nil {
			l.lg.Warn("ending the turns of a down node failed", zap.String("node", node), zap.Error(err))
		}
		return
	}
	for _, sess := range failed {
		l.lg.Warn("turn failed: its node is down", zap.String("node", node), zap.String("session", sess.Id))
		// The turn holds no fleet account any more; a rerun reserves again.
		if err := l.s.fleet.OnEnd(ctx, sess.Id, sess.Agent); err != nil {
			l.lg.Warn("fleet reservation ledger update failed", zap.String("session", sess.Id), zap.Error(err))
		}
	}
}
