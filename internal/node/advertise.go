package node

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/tick"
)

// DefaultReadinessInterval is how often a connected node looks at its
// agents again (version, login, accounts) and tells the control plane
// when something changed.
const DefaultReadinessInterval = 60 * time.Second

// recheckAgents asks the stream's advertiser to look at the agents now (a
// turn failed for want of a login: the user may be logging in).
func (a *Daemon) recheckAgents() {
	if a.cfg.Probe {
		a.probes.again() // the probe that said ready may be out of date
	} else {
		a.probes.forget() // probed on demand: no loop probes again, so the files say
	}
	a.advertiseNow()
}

// advertiseNow asks the stream's advertiser to send what changed now.
func (a *Daemon) advertiseNow() {
	select {
	case a.recheck <- struct{}{}:
	default: // one is pending already
	}
}

// advertise keeps what the control plane shows of this node's agents
// current while the stream lasts: every ReadinessInterval, and whenever
// recheckAgents asks, it looks at them (Readiness only looks; it runs
// nothing) and sends a NodeInfo frame when they differ from what it last
// sent (sent: the hello's list). A send error ends it; the stream's own
// loop sees the broken stream.
func (a *Daemon) advertise(ctx context.Context, sent []*castv1.AgentInstall, send func(*castv1.ConnectRequest) error) {
	tick.Loop{Every: a.cfg.ReadinessInterval, Wake: a.recheck}.Run(ctx, func() bool {
		now := a.readiness()
		if slices.EqualFunc(now, sent, func(x, y *castv1.AgentInstall) bool { return proto.Equal(x, y) }) {
			return true
		}
		if err := send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_NodeInfo{NodeInfo: &castv1.NodeInfo{Agents: now}}}); err != nil {
			return false
		}
		a.lg.Info("agents changed; told the control plane", zap.Int("ready", countReady(now)))
		sent = now
		return true
	})
}

func countReady(list []*castv1.AgentInstall) int {
	n := 0
	for _, in := range list {
		if in.Ready {
			n++
		}
	}
	return n
}
