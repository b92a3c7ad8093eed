package client

import (
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// A login that ends the moment its code arrives still lets the browser's
// page be written: stop waits for the response in flight.
func TestCallbackStopLetsThePageFinish(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	inHandler, release := make(chan struct{}), make(chan struct{})
	stop := serveCallback(lis, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(inHandler)
		<-release
		io.WriteString(w, "logged in")
	}))
	type reply struct {
		body string
		err  error
	}
	got := make(chan reply, 1)
	go func() {
		resp, err := http.Get("http://" + addr + callbackPath)
		if err != nil {
			got <- reply{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- reply{string(b), err}
	}()
	<-inHandler
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// The page is written only once the login is ending: the listener is
	// closed (a new dial is refused).
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
		if c != nil {
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatal("the callback listener was not closed by stop")
		}
		time.Sleep(time.Millisecond) // polling the listener's state, nothing to wait on
	}
	close(release)
	r := <-got
	if r.err != nil || r.body != "logged in" {
		t.Fatalf("the browser got %q, %v; want the whole page", r.body, r.err)
	}
	<-stopped
}
