package controlplane_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A client hammering the control plane without credentials gets a line per
// interval, not one per call (13,817 lines in 4 s before), and every
// refusal is still counted: the lines' suppressed counts add up to the calls.
func TestRefusalsAreLoggedRateLimitedPerPeer(t *testing.T) {
	const calls, every = 1000, time.Second
	core, logs := observer.New(zapcore.WarnLevel)
	cfg := testharness.ControlPlaneConfig(t)
	cfg.RefusalLog = every
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := controlplane.Start(ctx, cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	anon := testharness.DialAs(t, srv.Addr(), "")

	start := time.Now()
	for i := range calls {
		_, err := anon.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{})
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("call %d without a token: %v, want UNAUTHENTICATED", i, err)
		}
	}
	elapsed := time.Since(start)

	counted := func() (lines, total int) {
		for _, e := range logs.All() {
			switch e.Message {
			case "request refused":
				lines++
				total += 1 + suppressed(e)
			case "requests refused (lines suppressed)":
				lines++
				total += suppressed(e)
			}
		}
		return lines, total
	}
	testharness.WaitFor(t, 3*every+10*time.Second, "every refusal counted in the log", func() bool {
		_, total := counted()
		return total == calls
	})
	lines, _ := counted()
	// One line and one count per interval at most, plus the flush that
	// reported the tail.
	if most := 2*int(elapsed/every) + 4; lines > most {
		t.Errorf("%d refusal lines for %d calls in %s; want at most %d", lines, calls, elapsed, most)
	}
	for _, e := range logs.FilterMessage("request refused").All() {
		if e.ContextMap()["peer"] != "127.0.0.1" {
			t.Errorf("refusal line names peer %v, want 127.0.0.1", e.ContextMap()["peer"])
		}
	}
}

func suppressed(e observer.LoggedEntry) int {
	n, _ := e.ContextMap()["suppressed"].(int64)
	return int(n)
}
