package controlplane

import (
	"context"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"google.golang.org/grpc/peer"

	"github.com/cast-dev/cast/internal/tick"
)

// Each refused request is an audit line, but a client retrying without
// credentials in a loop wrote 13,817 lines (4.5 MB) in 4 s. refusalLog
// lets each peer (the caller's IP, whatever its connections or ports) one
// line per interval and counts the rest; the counts are logged with the
// peer's next line, or by the flush loop within an interval, so no refusal
// goes uncounted. The map is bounded: past maxRefusalPeers, new peers share
// one overflow entry.
type refusalLog struct {
	mu    sync.Mutex
	every time.Duration
	peers map[string]*peerRefusals
}

type peerRefusals struct {
	lim        *rate.Limiter
	suppressed int
	last       time.Time
}

const (
	maxRefusalPeers = 4096
	overflowPeer    = "(other peers)"
)

func newRefusalLog(every time.Duration) *refusalLog {
	return &refusalLog{every: every, peers: map[string]*peerRefusals{}}
}

// note counts one refusal from peer: whether it gets a line, and how many
// of the peer's refusals went unlogged since its last line.
func (r *refusalLog) note(peer string, now time.Time) (logIt bool, suppressed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.peers[peer]
	if p == nil {
		if len(r.peers) >= maxRefusalPeers {
			r.sweep(now)
		}
		if len(r.peers) >= maxRefusalPeers {
			peer = overflowPeer
			p = r.peers[peer]
		}
	}
	if p == nil {
		p = &peerRefusals{lim: rate.NewLimiter(rate.Every(r.every), 1)}
		r.peers[peer] = p
	}
	p.last = now
	if !p.lim.AllowN(now, 1) {
		p.suppressed++
		return false, 0
	}
	suppressed, p.suppressed = p.suppressed, 0
	return true, suppressed
}

// flush returns each peer's refusals not yet logged, resetting them, and
// forgets peers quiet for an interval.
func (r *refusalLog) flush(now time.Time) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for peer, p := range r.peers {
		if p.suppressed > 0 {
			out[peer] = p.suppressed
			p.suppressed = 0
		}
	}
	r.sweep(now)
	return out
}

// sweep forgets peers with nothing unlogged and no refusal for an interval.
func (r *refusalLog) sweep(now time.Time) {
	for peer, p := range r.peers {
		if p.suppressed == 0 && now.Sub(p.last) >= r.every {
			delete(r.peers, peer)
		}
	}
}

// run logs the suppressed counts every interval, and once more when ctx
// ends.
func (r *refusalLog) run(ctx context.Context, lg *zap.Logger) {
	logAll := func() bool {
		for peer, n := range r.flush(time.Now()) {
			lg.Warn("requests refused (lines suppressed)", zap.String("peer", peer), zap.Int("suppressed", n), zap.Duration("within", r.every))
		}
		return true
	}
	tick.Every(ctx, r.every, logAll)
	logAll()
}

// peerHost names a call's peer by its IP ("" when unknown).
func peerHost(ctx context.Context) string {
	pr, ok := peer.FromContext(ctx)
	if !ok || pr.Addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(pr.Addr.String())
	if err != nil {
		return pr.Addr.String()
	}
	return host
}
