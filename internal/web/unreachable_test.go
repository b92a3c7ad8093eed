package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

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
