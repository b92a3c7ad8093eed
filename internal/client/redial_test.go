package client

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

func TestConnectParams(t *testing.T) {
	for _, tc := range []struct {
		name              string
		redialMax         time.Duration
		wantBase, wantMax time.Duration
	}{
		{"the default (the cast CLI)", 0, 200 * time.Millisecond, 2 * time.Second},
		{"a longer cap keeps the default", 10 * time.Second, 200 * time.Millisecond, 2 * time.Second},
		{"a shorter cap, less its jitter", 1200 * time.Millisecond, 200 * time.Millisecond, time.Second},
		{"a cap below the first pause", 120 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := connectParams(Options{RedialMax: tc.redialMax}).Backoff
			if b.BaseDelay != tc.wantBase || b.MaxDelay != tc.wantMax {
				t.Fatalf("redials from %v to %v, want %v to %v", b.BaseDelay, b.MaxDelay, tc.wantBase, tc.wantMax)
			}
			if jittered := time.Duration(float64(b.MaxDelay) * (1 + b.Jitter)); tc.redialMax > 0 && jittered > tc.redialMax {
				t.Fatalf("a jittered redial pause reaches %v, past %v", jittered, tc.redialMax)
			}
		})
	}
}

// gate is a control plane's port: while down, each connection is closed
// as it is accepted (as a refused connect fails a redial) and counted;
// once up, connections reach the server.
type gate struct {
	net.Listener
	up      atomic.Bool
	refused chan struct{}
}

func (g *gate) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil || g.up.Load() {
			return c, err
		}
		c.Close()
		select {
		case g.refused <- struct{}{}:
		default:
		}
	}
}

// While the control plane is away, calls fail at once, and once it is
// back a call reaches it within Options.RedialMax, however long it was
// away: the redials' backoff stops growing there, not at the default 2 s.
func TestRedialMaxBoundsHowSoonAControlPlaneBackIsReached(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{Listener: l, refused: make(chan struct{}, 64)}
	srv := grpc.NewServer()
	castv1.RegisterNodeServiceServer(srv, &flaky{})
	go func() { _ = srv.Serve(g) }()
	t.Cleanup(srv.Stop)
	const redialMax = 250 * time.Millisecond
	c, err := DialOpts(l.Addr().String(), Options{RedialMax: redialMax})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call := func(opts ...grpc.CallOption) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Nodes.ReportTurn(ctx, &castv1.ReportTurnRequest{}, opts...)
		return time.Since(start), err
	}
	if _, err := call(); status.Code(err) != codes.Unavailable {
		t.Fatalf("a call while the control plane is away: %v, want UNAVAILABLE", err)
	}
	// Enough redials for the default backoff to have grown to 2 s.
	for i := range 8 {
		select {
		case <-g.refused:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d redials, then none for 10 s", i)
		}
	}
	if took, err := call(); status.Code(err) != codes.Unavailable || took > time.Second {
		t.Fatalf("a call while the control plane is away: %v after %v, want UNAVAILABLE at once", err, took)
	}
	g.up.Store(true)
	// Waits for the connection, so it returns when a redial got through.
	took, err := call(grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	// The cap, with room for a loaded machine; the default backoff takes
	// 1.6 s or more here.
	if took > redialMax+750*time.Millisecond {
		t.Fatalf("the control plane back was reached after %v, want within about %v", took, redialMax)
	}
	t.Logf("reached %v after the control plane was back", took.Round(time.Millisecond))
}
