package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/tick"
	"github.com/cast-dev/cast/internal/validate"
)

// stayConnected runs one stream after another, with jittered exponential
// backoff between them, until ctx ends (nil) or the control plane refuses
// the node's credential.
func (a *Daemon) stayConnected(ctx context.Context) error {
	pauses := retry.Reconnect(a.cfg.ReconnectMin, a.cfg.ReconnectMax).Pauses()
	for ctx.Err() == nil {
		start := time.Now()
		var held *tls.Certificate // what the stream presents (the newest when it dials)
		if a.id != nil {
			held = a.id.Cert()
		}
		err := a.connectOnce(ctx)
		if ctx.Err() != nil {
			break
		}
		if errors.Is(err, errRotated) {
			a.lg.Info("client certificate renewed; reconnecting the stream")
			continue
		}
		if c := status.Code(err); c == codes.Unauthenticated || c == codes.PermissionDenied {
			if err := a.refused(err, held); err != nil {
				return err
			}
			continue
		}
		if time.Since(start) > 30*time.Second {
			pauses.Reset() // it was a healthy session
		}
		wait := pauses.Next()
		a.lg.Info("control plane stream ended; reconnecting", zap.Error(err), zap.Duration("in", wait))
		tick.Sleep(ctx, wait)
	}
	return nil
}

// refused is what a stream refused for its credential (err) ends with:
// nil for one refused for the certificate held, which a renewal has
// replaced since (dial again), the error Run ends with otherwise.
func (a *Daemon) refused(err error, held *tls.Certificate) error {
	if a.renewedSince(held) {
		// Refused for the certificate it replaced (expired while
		// its renewal was on the way): not a refusal of the node.
		a.lg.Info("stream refused for the previous client certificate; reconnecting with the renewed one", zap.Error(err))
		return nil
	}
	// Revoked (cast node rm) or unknown: rejoining is an admin's call.
	a.lg.Error("control plane refused this node's credential; join again with a new --join-token", zap.Error(err))
	path := credentialPath(a.cfg.DataDir)
	if a.id != nil {
		path = a.id.Path()
	}
	return fmt.Errorf("node %s: credential refused (%v); remove %s and start with a new --join-token", a.cfg.Name, err, path)
}

// welcomeTimeout bounds the wait for the control plane's welcome on a new
// stream (a hello that went into a partition is never answered).
const welcomeTimeout = 10 * time.Second

// connectOnce runs one stream until it fails, goes silent, or ctx ends.
func (a *Daemon) connectOnce(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The stream has its own connection, dialed anew each time: after a
	// partition the old one may be half-open (the far end gone, nothing
	// reset), and a stream opened on it would wait on gRPC's keepalive
	// (40 s) to learn that.
	select {
	case <-a.rotate: // this stream dials with the newest certificate anyway
	default:
	}
	sc, err := client.DialOpts(a.cfg.ControlPlane, client.Options{Token: a.cred, TLS: a.tls, RedialMax: a.cfg.ReconnectMax})
	if err != nil {
		return err
	}
	defer sc.Close()
	welcome := time.AfterFunc(welcomeTimeout, cancel)
	defer welcome.Stop()
	stream, err := sc.Nodes.Connect(ctx)
	if err != nil {
		return err
	}
	send := lockedSend(stream)
	hello, w, err := a.greet(stream, send)
	if err != nil {
		return err
	}
	welcome.Stop()
	a.lg.Info("connected to control plane", zap.String("addr", a.cfg.ControlPlane), zap.String("replica", replicaOf(stream.Context())), zap.Int64("lease_ttl_s", w.LeaseTtlSeconds))
	a.leaseTTL.Store(int64(time.Duration(w.LeaseTtlSeconds) * time.Second))
	a.lastContact.Store(time.Now().UnixNano())
	hbErr := make(chan error, 1)
	go func() { hbErr <- heartbeat(ctx, time.Duration(w.HeartbeatIntervalMillis)*time.Millisecond, send) }()
	go a.advertise(ctx, hello.Node.Agents, send)
	return a.receive(ctx, cancel, stream, send, hbErr)
}

// lockedSend is a send on stream that its heartbeat, its advertisements
// and its acks may call at once: gRPC streams allow one sender at a time.
func lockedSend(stream castv1.NodeService_ConnectClient) func(*castv1.ConnectRequest) error {
	var sendMu sync.Mutex
	return func(r *castv1.ConnectRequest) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(r)
	}
}

// greet sends the node's hello and reads the control plane's welcome.
func (a *Daemon) greet(stream castv1.NodeService_ConnectClient, send func(*castv1.ConnectRequest) error) (*castv1.Hello, *castv1.Welcome, error) {
	hello := &castv1.Hello{Node: a.describe(), OwnedSessions: a.helloSessions()}
	if err := send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Hello{Hello: hello}}); err != nil {
		if errors.Is(err, io.EOF) {
			_, err = stream.Recv() // the server ended the stream; this is why (a refused credential)
		}
		return nil, nil, err
	}
	first, err := stream.Recv()
	if err != nil {
		return nil, nil, err
	}
	w := first.GetWelcome()
	if w == nil || w.HeartbeatIntervalMillis <= 0 {
		return nil, nil, errors.New("control plane did not welcome the node")
	}
	return hello, w, nil
}

// receive handles the stream's commands, acking each, until the stream
// fails, its heartbeat does (hbErr), the control plane goes silent for a
// lease or a renewed certificate moves the stream (both cancel).
func (a *Daemon) receive(ctx context.Context, cancel context.CancelFunc, stream castv1.NodeService_ConnectClient, send func(*castv1.ConnectRequest) error, hbErr <-chan error) error {
	// waiting is since when the loop has waited on the stream; 0 while it
	// handles a command (a slow command is not a silent control plane).
	var waiting atomic.Int64
	waiting.Store(time.Now().UnixNano())
	go endWhenSilent(ctx, time.Duration(a.leaseTTL.Load()), &waiting, func(silent time.Duration) {
		a.lg.Warn("control plane silent for a lease; ending the stream to dial again", zap.Duration("silent_for", silent))
		cancel()
	})
	var rotated atomic.Bool
	go a.endWhenRotated(ctx, &waiting, func() { rotated.Store(true); cancel() })
	for {
		f, err := stream.Recv()
		if rotated.Load() {
			return errRotated
		}
		if err != nil {
			return err
		}
		a.lastContact.Store(time.Now().UnixNano())
		waiting.Store(time.Now().UnixNano())
		if cmd := f.GetCommand(); cmd != nil {
			waiting.Store(0)
			ack := a.command(ctx, cmd)
			waiting.Store(time.Now().UnixNano())
			if err := send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Ack{Ack: ack}}); err != nil {
				return err
			}
		}
		select {
		case err := <-hbErr:
			return err
		default:
		}
	}
}

// command handles cmd and counts it; its ack carries a refusal.
func (a *Daemon) command(ctx context.Context, cmd *castv1.Command) *castv1.CommandAck {
	ack := &castv1.CommandAck{CommandId: cmd.Id}
	if err := a.handle(ctx, cmd); err != nil {
		a.lg.Warn("command refused", zap.String("command", cmd.Id), zap.Error(err))
		ack.Error = err.Error()
	}
	a.m.Commands.WithLabelValues(commandKind(cmd)).Inc()
	return ack
}

// replicaOf is the address of the replica a stream went to (one of a
// --controlplane list), for the log.
func replicaOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// endWhenSilent calls end once the stream has been waited on for ttl with
// nothing received. The control plane answers every heartbeat, so that
// silence is a broken link (a partition leaves the stream half-open: sends
// still succeed into buffers, nothing comes back); the lease has lapsed by
// then anyway, and only a new stream can get the node back.
func endWhenSilent(ctx context.Context, ttl time.Duration, waiting *atomic.Int64, end func(silent time.Duration)) {
	if ttl <= 0 {
		return
	}
	tick.Every(ctx, ttl/8, func() bool {
		since := waiting.Load()
		if since == 0 {
			return true
		}
		if silent := time.Since(time.Unix(0, since)); silent >= ttl {
			end(silent)
			return false
		}
		return true
	})
}

// heartbeat sends a numbered heartbeat every d until ctx ends or a send
// fails.
func heartbeat(ctx context.Context, d time.Duration, send func(*castv1.ConnectRequest) error) error {
	var seq int64
	var err error
	tick.Every(ctx, d, func() bool {
		seq++
		err = send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Heartbeat{Heartbeat: &castv1.Heartbeat{Seq: seq}}})
		return err == nil
	})
	if err != nil {
		return err
	}
	return ctx.Err()
}

// helloSessions are the sessions a hello lists: every one the node owns,
// or, for a node owning more than the control plane takes in one hello
// (which it refused, so the node never connected), that many: a window
// over the sorted ids that moves on at each connect, so each session the
// node believes it owns is checked (and released if it was lost) within
// a few connects. The protocol has no frame for the rest.
func (a *Daemon) helloSessions() []string {
	ids := a.st.ids()
	if len(ids) <= validate.MaxHelloSessions {
		return ids
	}
	slices.Sort(ids)
	from := int((a.helloFrom.Add(validate.MaxHelloSessions) - validate.MaxHelloSessions) % int64(len(ids)))
	a.lg.Warn("the node owns more sessions than one hello may list; listing a window of them, the next connect the next",
		zap.Int("owned", len(ids)), zap.Int("listed", validate.MaxHelloSessions), zap.Int("from", from))
	return slices.Concat(ids[from:], ids[:from])[:validate.MaxHelloSessions]
}

// describe is the node's hello: name, labels, installed agents.
func (a *Daemon) describe() *castv1.Node {
	host, _ := os.Hostname()
	n := &castv1.Node{Name: a.cfg.Name, Labels: a.cfg.labels(), Os: runtime.GOOS, Hostname: host, CapabilityVersion: CapabilityVersion}
	n.Agents = a.readiness()
	return n
}
