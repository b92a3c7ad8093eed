package web_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/cast-dev/cast/internal/web"
)

// A kept-alive connection with no request on it is closed after the idle
// timeout, so idle browsers and clients that open connections and leave
// them cannot hold the listener's connections for ever. The read
// deadline is far longer than the timeout: it only stops a hang.
func TestIdleConnectionsAreClosed(t *testing.T) {
	cfg := web.DefaultConfig()
	cfg.Listen, cfg.Plain = "127.0.0.1:0", true
	cfg.SetIdleTimeout(100 * time.Millisecond)
	s, err := web.Start(cfg, grpc.NewServer(), unreachableGrants{}, nil, nil, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(t.Context()) })
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /auth/methods HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the server closed the connection after the request; want it kept alive until idle")
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %v; want it closed (EOF)", err)
	}
}
