package web_test

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/cast-dev/cast/internal/controlplane"
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
	srv := httptest.NewServer(web.NewHandler(l, http.NotFoundHandler(), false, "", controlplane.StatusOf, zaptest.NewLogger(t)))
	t.Cleanup(srv.Close)
	c := &http.Client{Timeout: 20 * time.Second}
	for _, tc := range []struct{ name, method, path, form string }{
		{"API call", http.MethodPost, "/cast.v1.SessionService/ListSessions", "{}"},
		{"sign-out", http.MethodPost, "/auth/logout", ""},
		{"login page", http.MethodGet, "/auth/login?code=a-code", ""},
		{"sign-in", http.MethodPost, "/auth/login", "code=a-code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.form))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case strings.HasPrefix(tc.path, "/cast.v1."):
				req.Header.Set("Content-Type", "application/json") // a Connect call
			case tc.form != "":
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			req.AddCookie(&http.Cookie{Name: web.SessionCookie(req.Host, false), Value: "a-session"})
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("no answer while the store is away: %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("status %d; want 503 (retry)", resp.StatusCode)
			}
			// The API's refusal is the API's: its code and reason.
			if code, reason := answerOf(t, resp); strings.HasPrefix(tc.path, "/cast.v1.") && (code != "unavailable" || reason != "UNAVAILABLE") {
				t.Fatalf("API call: %s (reason %q), want unavailable UNAVAILABLE", code, reason)
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
	return appOver(t, func(g *grpc.Server) { castv1.RegisterSessionServiceServer(g, blockingSessions{}) })
}

// appOver is the app over the services register adds, its store away.
func appOver(t *testing.T, register func(*grpc.Server)) *web.Handler {
	g := grpc.NewServer()
	register(g)
	api, err := vanguardgrpc.NewTranscoder(g)
	if err != nil {
		t.Fatal(err)
	}
	l := web.NewLogins(unreachableGrants{}, web.DefaultCodeTTL, web.DefaultSessionTTL)
	return web.NewHandler(l, api, false, "", controlplane.StatusOf, zaptest.NewLogger(t))
}

// A browser's unary API call comes without a deadline (the app sends
// none): the call gets one, by Connect (the app's) or gRPC-Web alike, so a
// handler waiting on a store that does not answer ends and the browser is
// told the call timed out and to retry (Connect: 504; gRPC-Web:
// DEADLINE_EXCEEDED), instead of the page hanging for as long as etcd is
// away. A deadline the call brings is its own.
func TestUnaryAPICallWithoutDeadlineEnds(t *testing.T) {
	h := blockingHandler(t)
	h.SetCallTimeout(50 * time.Millisecond)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := &http.Client{Timeout: 20 * time.Second} // stops a hang only
	connect := func(req *http.Request, timeoutMs string) {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Connect-Protocol-Version", "1")
		if timeoutMs != "" {
			req.Header.Set("Connect-Timeout-Ms", timeoutMs)
		}
	}
	grpcWeb := func(req *http.Request, timeoutMs string) {
		req.Header.Set("Content-Type", "application/grpc-web+proto")
		if timeoutMs != "" {
			req.Header.Set("Grpc-Timeout", timeoutMs+"m")
		}
	}
	for _, proto := range []struct {
		name string
		body []byte
		set  func(*http.Request, string)
		// timedOut says the answer is the call's deadline passing.
		timedOut func(*http.Response, []byte) bool
	}{
		{"Connect", []byte("{}"), connect, func(resp *http.Response, _ []byte) bool {
			return resp.StatusCode == http.StatusGatewayTimeout
		}},
		{"gRPC-Web", []byte{0, 0, 0, 0, 0}, grpcWeb, func(resp *http.Response, body []byte) bool {
			return resp.StatusCode == http.StatusOK && (resp.Header.Get("Grpc-Status") == "4" ||
				bytes.Contains(bytes.ToLower(body), []byte("grpc-status:4")))
		}},
	} {
		for _, tc := range []struct{ name, timeoutMs string }{
			{"no deadline of its own", ""},
			{"its own deadline", "100"},
		} {
			t.Run(proto.name+"/"+tc.name, func(t *testing.T) {
				req, err := http.NewRequest(http.MethodPost, srv.URL+"/cast.v1.SessionService/ListSessions", bytes.NewReader(proto.body))
				if err != nil {
					t.Fatal(err)
				}
				proto.set(req, tc.timeoutMs)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatalf("no answer while the store is away: %v", err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if !proto.timedOut(resp, body) {
					t.Fatalf("status %d %v (%q); want the call timed out (retry)", resp.StatusCode, resp.Header, body)
				}
			})
		}
	}
}

// probeNodes is a NodeService whose ProbeNode answers how long its call
// had left when it began.
type probeNodes struct {
	castv1.UnimplementedNodeServiceServer
}

func (probeNodes) ProbeNode(ctx context.Context, _ *castv1.ProbeNodeRequest) (*castv1.ProbeNodeResponse, error) {
	d, ok := ctx.Deadline()
	if !ok {
		return nil, status.Error(codes.FailedPrecondition, "no deadline")
	}
	return nil, status.Error(codes.FailedPrecondition, "left "+time.Until(d).Round(time.Second).String())
}

// A unary method whose own wait is longer than the default deadline (a
// node's probe of its agents, up to 5 minutes) is not cut by it: the
// deadline a call without one gets is past that method's known limit.
func TestDefaultDeadlineOutlastsTheMethodsOwnLimit(t *testing.T) {
	h := appOver(t, func(g *grpc.Server) { castv1.RegisterNodeServiceServer(g, probeNodes{}) })
	h.SetCallLimits(map[string]time.Duration{castv1.NodeService_ProbeNode_FullMethodName: 5 * time.Minute})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	_, body := connectCall(t, &http.Client{Timeout: 20 * time.Second}, srv.URL, "NodeService/ProbeNode", `{"node":"n1"}`, "")
	var left time.Duration
	var e struct{ Message string }
	if json.Unmarshal([]byte(body), &e) == nil && strings.HasPrefix(e.Message, "left ") {
		left, _ = time.ParseDuration(strings.TrimPrefix(e.Message, "left "))
	}
	if left <= 5*time.Minute {
		t.Fatalf("ProbeNode's call had %v (%s); want more than its own 5 minutes", left, body)
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
