package web_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/vanguard/vanguardgrpc"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"

	"github.com/cast-dev/cast/internal/web"
)

// unreachableGrants is the store while etcd cannot be reached: its client
// waits for etcd until the call's context ends.
type unreachableGrants struct{}

func (unreachableGrants) PutWebGrant(ctx context.Context, _, _ string, _ []byte, _ time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}

func (unreachableGrants) TakeWebGrant(ctx context.Context, _, _ string) ([]byte, bool, error) {
	<-ctx.Done()
	return nil, false, ctx.Err()
}

func (unreachableGrants) GetWebGrant(ctx context.Context, _, _ string) ([]byte, bool, error) {
	<-ctx.Done()
	return nil, false, ctx.Err()
}

func (unreachableGrants) DeleteWebGrant(ctx context.Context, _, _ string) error {
	<-ctx.Done()
	return ctx.Err()
}

// While the store does not answer, a signed-in browser's API call and its
// sign-out, and a login link's page and its sign-in, are told to retry
// (503) once the store call's deadline passes, instead of hanging for as
// long as etcd is away or failing as if the link were at fault. The
// client's own timeout is far longer than the deadline: it only stops a
// hang.
func TestUnreachableStoreAnswersRetry(t *testing.T) {
	l := web.NewLogins(unreachableGrants{}, web.DefaultCodeTTL, web.DefaultSessionTTL)
	l.SetStoreTimeout(50 * time.Millisecond)
	srv := httptest.NewServer(web.NewHandler(l, http.NotFoundHandler(), false, "", zaptest.NewLogger(t)))
	t.Cleanup(srv.Close)
	c := &http.Client{Timeout: 20 * time.Second}
	for _, tc := range []struct{ name, method, path, form string }{
		{"API call", http.MethodPost, "/cast.v1.SessionService/ListSessions", ""},
		{"sign-out", http.MethodPost, "/auth/logout", ""},
		{"login page", http.MethodGet, "/auth/login?code=a-code", ""},
		{"sign-in", http.MethodPost, "/auth/login", "code=a-code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.form))
			if err != nil {
				t.Fatal(err)
			}
			if tc.form != "" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			req.AddCookie(&http.Cookie{Name: web.CookieName, Value: "a-session"})
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("no answer while the store is away: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("status %d; want 503 (retry)", resp.StatusCode)
			}
		})
	}
}

// blockingSessions is a service whose reads wait on the store as they do
// while etcd cannot be reached: until the call's context ends.
type blockingSessions struct {
	castv1.UnimplementedSessionServiceServer
}

func (blockingSessions) ListSessions(ctx context.Context, _ *castv1.ListSessionsRequest) (*castv1.ListSessionsResponse, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// blockingHandler is the app over blockingSessions, its store away.
func blockingHandler(t *testing.T) *web.Handler {
	g := grpc.NewServer()
	castv1.RegisterSessionServiceServer(g, blockingSessions{})
	api, err := vanguardgrpc.NewTranscoder(g)
	if err != nil {
		t.Fatal(err)
	}
	l := web.NewLogins(unreachableGrants{}, web.DefaultCodeTTL, web.DefaultSessionTTL)
	return web.NewHandler(l, api, false, "", zaptest.NewLogger(t))
}

// A browser's unary API call comes without a deadline (the app sends
// none): the call gets one, so a handler waiting on a store that does
// not answer ends and the browser is told the call timed out and to retry
// (504), instead of the page hanging for as long as etcd is away. A
// deadline the call brings is its own.
func TestUnaryAPICallWithoutDeadlineEnds(t *testing.T) {
	h := blockingHandler(t)
	h.SetCallTimeout(50 * time.Millisecond)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := &http.Client{Timeout: 20 * time.Second} // stops a hang only
	for _, tc := range []struct{ name, timeoutMs string }{
		{"no deadline of its own", ""},
		{"its own deadline", "100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/cast.v1.SessionService/ListSessions", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Connect-Protocol-Version", "1")
			if tc.timeoutMs != "" {
				req.Header.Set("Connect-Timeout-Ms", tc.timeoutMs)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("no answer while the store is away: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusGatewayTimeout {
				t.Fatalf("status %d (%s); want 504 (timed out, retry)", resp.StatusCode, body)
			}
		})
	}
}

// WatchSession here says whether the stream got a deadline.
func (blockingSessions) WatchSession(_ *castv1.WatchSessionRequest, ss grpc.ServerStreamingServer[castv1.WatchSessionResponse]) error {
	if _, ok := ss.Context().Deadline(); ok {
		return status.Error(codes.FailedPrecondition, "the stream got a deadline")
	}
	return nil
}

// A browser's stream (WatchSession, open as long as its page is) gets no
// deadline: only unary calls do.
func TestAPIStreamGetsNoDeadline(t *testing.T) {
	srv := httptest.NewServer(blockingHandler(t))
	t.Cleanup(srv.Close)
	msg := []byte("{}")
	env := append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...) // a Connect envelope: flags, length
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/cast.v1.SessionService/WatchSession", bytes.NewReader(env))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte("deadline")) || !bytes.Contains(body, []byte("{}")) {
		t.Fatalf("status %d, %q; want 200 and a clean end of stream", resp.StatusCode, body)
	}
}
