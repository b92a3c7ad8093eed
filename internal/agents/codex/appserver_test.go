package codex

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A server that dies before answering fails the handshake with an error
// instead of hanging the caller.
func TestStartAppServerFailsWhenServerExits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := StartAppServer(ctx, "/bin/false", nil, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("err = %v, want an exit error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("handshake waited for the deadline")
	}
}
