package etcdembed

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// A port taken before etcd binds it is recognised, so Start can pick
// again when the port was its own pick (a port freed by pick may be taken
// by another process before the bind).
func TestTakenPortIsRecognised(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := Config{Dir: t.TempDir(), ClientAddr: l.Addr().String(), PeerAddr: "127.0.0.1:0", QuotaBytes: 64 << 20}
	e, err := Start(ctx, c, zaptest.NewLogger(t))
	if err == nil {
		e.Close()
		t.Fatal("etcd started on a port that is taken")
	}
	if !addrInUse(err) {
		t.Fatalf("not recognised as a taken port: %v", err)
	}
	// Picked ports work around it.
	c.ClientAddr, c.Dir = "127.0.0.1:0", t.TempDir()
	e, err = Start(ctx, c, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}
