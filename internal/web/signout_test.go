package web_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// Signing out ends the calls that browser session has open: a page's
// WatchSession, opened with the cookie, does not keep streaming the
// session to a browser that signed out (on a shared machine, the next
// person at it). A call of another browser session stays open.
func TestSignOutEndsTheSessionsOpenCalls(t *testing.T) {
	srv, auth := startWeb(t)
	base := srv.WebURL()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := testharness.DialServer(t, srv)
	join, err := auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{TtlSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	joined, err := testharness.DialAs(t, srv.Addr(), "").Auth.JoinNode(ctx, &castv1.JoinNodeRequest{Name: "raw1", JoinToken: join.Token})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := testharness.DialAs(t, srv.Addr(), joined.Credential).Nodes.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hello := &castv1.Hello{Node: &castv1.Node{Name: "raw1", Agents: []*castv1.AgentInstall{{Name: "claude"}}}}
	if err := conn.Send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Hello{Hello: hello}}); err != nil {
		t.Fatal(err)
	}
	if f, err := conn.Recv(); err != nil || f.GetWelcome() == nil {
		t.Fatalf("connect raw1: %v %v", f, err)
	}
	sess, err := admin.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "raw1", Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	browser := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		if resp := testharness.OpenLoginLink(t, c, loginLink(t, auth)); resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-in: %d", resp.StatusCode)
		}
		return c
	}
	leaving, staying := browser(), browser()
	ended := watchThrough(ctx, t, leaving, base, sess.Id)
	stays := watchThrough(ctx, t, staying, base, sess.Id)

	req, _ := http.NewRequest(http.MethodPost, base+"/auth/logout", nil)
	req.Header.Set("Origin", base)
	resp, err := leaving.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	select {
	case end := <-ended:
		if !strings.Contains(end, `"unauthenticated"`) {
			t.Errorf("the signed-out browser's watch ended with %q, want unauthenticated", end)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the signed-out browser's WatchSession was still streaming 10s after sign-out")
	}
	select {
	case end := <-stays:
		t.Fatalf("the other browser's watch ended too: %q", end)
	default:
	}
}

// watchThrough opens WatchSession of id with browser's cookie (Connect's
// JSON streaming, as the app calls it), waits for its first event, and
// returns a channel that gets how the stream ended (its end-of-stream
// message, or the read's error).
func watchThrough(ctx context.Context, t *testing.T, browser *http.Client, base, id string) chan string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"sessionId": id})
	frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body)))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/cast.v1.SessionService/WatchSession", strings.NewReader(string(append(frame, body...))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Origin", base)
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	r := bufio.NewReader(resp.Body)
	next := func() (flags byte, msg []byte, err error) {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return 0, nil, err
		}
		msg = make([]byte, binary.BigEndian.Uint32(hdr[1:]))
		_, err = io.ReadFull(r, msg)
		return hdr[0], msg, err
	}
	if flags, msg, err := next(); err != nil || flags&2 != 0 {
		t.Fatalf("watch through the web: %d %s %v", resp.StatusCode, msg, err)
	}
	ended := make(chan string, 1)
	go func() {
		for {
			flags, msg, err := next()
			if err != nil {
				ended <- fmt.Sprintf("read: %v", err)
				return
			}
			if flags&2 != 0 {
				ended <- string(msg)
				return
			}
		}
	}()
	return ended
}
