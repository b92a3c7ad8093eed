package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/web"
)

// whoCalls is an API that answers the name of the browser session's
// principal.
var whoCalls = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	p, _ := web.Caller(r.Context())
	_, _ = io.WriteString(w, p.Name)
})

// Two control planes on one host, on two ports, keep their own sign-ins
// in one browser: a browser keys cookies by host, not port, so one cookie
// name for both let signing in to the second replace the first's session.
func TestEachListenerKeepsItsOwnSignIn(t *testing.T) {
	st := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	var bases []string
	for _, who := range []string{"alice", "bob"} {
		l := web.NewLogins(st, web.DefaultCodeTTL, web.DefaultSessionTTL)
		srv := httptest.NewServer(web.NewHandler(l, whoCalls, false, "", controlplane.StatusOf, zaptest.NewLogger(t)))
		t.Cleanup(srv.Close)
		code, _, err := l.NewCode(context.Background(), authz.Principal{Role: authz.User, Name: who, Cred: "c-" + who})
		if err != nil {
			t.Fatal(err)
		}
		if resp := testharness.OpenLoginLink(t, browser, srv.URL+"/auth/login?code="+code); resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-in as %s: %d", who, resp.StatusCode)
		}
		bases = append(bases, srv.URL)
	}
	for i, want := range []string{"alice", "bob"} {
		if _, got := connectCall(t, browser, bases[i], "SessionService/ListSessions", "{}", bases[i]); got != want {
			t.Errorf("%s answers as %q; want %q", bases[i], got, want)
		}
	}
}

// The session cookie lasts as long as the session: one signed in with a
// link its browser session made ends when that one does, not 12 hours on
// (the browser would keep sending a cookie the store has dropped).
func TestSessionCookieEndsWithTheSession(t *testing.T) {
	st := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	start := time.Unix(1_800_000_000, 0)
	now := start
	l := web.NewLogins(st, web.DefaultCodeTTL, web.DefaultSessionTTL)
	l.SetClock(func() time.Time { return now })
	alice := authz.Principal{Role: authz.User, Name: "alice", Cred: "c1"}
	first, err := l.Grant(context.Background(), alice, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.NewHandler(l, mintingAPI(t, l, alice), false, "", controlplane.StatusOf, zaptest.NewLogger(t)))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	jar, _ := cookiejar.New(nil)
	jar.SetCookies(u, []*http.Cookie{{Name: web.SessionCookie(u.Host, false), Value: first.ID}})
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	now = start.Add(11 * time.Hour) // an hour of the first session left
	_, code := connectCall(t, browser, srv.URL, "AuthService/CreateWebLogin", "{}", srv.URL)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/auth/login", strings.NewReader(url.Values{"code": {code}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == web.SessionCookie(u.Host, false) && c.Value != "" {
			if c.MaxAge != int(time.Hour.Seconds()) {
				t.Fatalf("the cookie lasts %ds; want the session's 3600", c.MaxAge)
			}
			return
		}
	}
	t.Fatalf("sign-in %d set no session cookie: %v", resp.StatusCode, resp.Cookies())
}
