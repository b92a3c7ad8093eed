package web_test

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"testing"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/web"
)

// Signing in again in a browser that holds a session ends that session,
// not only its cookie: the session the old cookie named would otherwise
// stay live in the store until its end (12 h) for whoever kept the
// cookie. By a login link, and by OIDC, whose callback comes back from
// the issuer without the SameSite=Strict session cookie (a browser sends
// it only on the app's own navigation to /auth/oidc).
func TestSigningInAgainEndsTheOldSession(t *testing.T) {
	iss := testharness.StartOIDCIssuer(t)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.Web.Listen, c.Web.Plain = "127.0.0.1:0", true
		c.Auth.OIDC.Issuer, c.Auth.OIDC.ClientID = iss.URL, "cast-web"
	})
	auth := testharness.DialServer(t, srv).Auth
	base := srv.WebURL()
	baseURL, _ := url.Parse(base)
	session := func(t *testing.T, jar http.CookieJar) string {
		t.Helper()
		for _, c := range jar.Cookies(baseURL) {
			if c.Name == web.SessionCookie(baseURL.Host, false) {
				return c.Value
			}
		}
		t.Fatal("no session cookie")
		return ""
	}
	// whoAmI calls with only the session id sid, as whoever kept the cookie.
	whoAmI := func(t *testing.T, sid string) int {
		t.Helper()
		jar, _ := cookiejar.New(nil)
		jar.SetCookies(baseURL, []*http.Cookie{{Name: web.SessionCookie(baseURL.Host, false), Value: sid}})
		code, _ := connectCall(t, &http.Client{Jar: jar}, base, "AuthService/WhoAmI", "{}", base)
		return code
	}
	linkSignIn := func(t *testing.T, jar http.CookieJar) {
		t.Helper()
		if resp := testharness.OpenLoginLink(t, &http.Client{Jar: jar}, loginLink(t, auth)); resp.StatusCode != http.StatusOK {
			t.Fatalf("link sign-in: %d", resp.StatusCode)
		}
	}
	oidcSignIn := func(t *testing.T, jar http.CookieJar) {
		t.Helper()
		stop := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		next := base + "/auth/oidc"
		for _, suffix := range []string{"", "&email=alice@example.com"} {
			resp, err := stop.Get(next + suffix)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			next = resp.Header.Get("Location")
		}
		// The issuer's redirect back carries the flow's cookie only.
		req, err := http.NewRequest(http.MethodGet, next, nil)
		if err != nil {
			t.Fatal(err)
		}
		cb, _ := url.Parse(next)
		for _, c := range jar.Cookies(cb) {
			if c.Name != web.SessionCookie(baseURL.Host, false) {
				req.AddCookie(c)
			}
		}
		resp, err := (&http.Client{CheckRedirect: stop.CheckRedirect}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("OIDC callback: %d", resp.StatusCode)
		}
		jar.SetCookies(baseURL, resp.Cookies())
	}
	for _, tc := range []struct {
		name  string
		again func(*testing.T, http.CookieJar)
	}{
		{"by a login link", linkSignIn},
		{"by OIDC", oidcSignIn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jar, _ := cookiejar.New(nil)
			linkSignIn(t, jar)
			old := session(t, jar)
			if code := whoAmI(t, old); code != http.StatusOK {
				t.Fatalf("first session: %d", code)
			}
			tc.again(t, jar)
			now := session(t, jar)
			if now == old {
				t.Fatal("signing in again kept the session id")
			}
			if code := whoAmI(t, now); code != http.StatusOK {
				t.Fatalf("new session: %d", code)
			}
			if code := whoAmI(t, old); code != http.StatusUnauthorized {
				t.Fatalf("old session after signing in again: %d; want 401", code)
			}
		})
	}
}
