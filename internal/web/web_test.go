package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/web"
)

// startWeb is a control plane serving the web app on loopback (plain
// HTTP, as --dev) and an admin client of its gRPC API.
func startWeb(t *testing.T) (*controlplane.Server, castv1.AuthServiceClient) {
	t.Helper()
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.Web.Listen, c.Web.Plain = "127.0.0.1:0", true
	})
	return srv, testharness.DialServer(t, srv).Auth
}

func loginLink(t *testing.T, auth castv1.AuthServiceClient) string {
	t.Helper()
	resp, err := auth.CreateWebLogin(context.Background(), &castv1.CreateWebLoginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if time.Until(resp.ExpireTime.AsTime()) > 2*time.Minute {
		t.Fatalf("a login link lives %s; want about a minute", time.Until(resp.ExpireTime.AsTime()))
	}
	return resp.Url
}

// connectCall is a Connect unary call with a JSON body, as any browser
// could send it; it returns the status and body.
func connectCall(t *testing.T, c *http.Client, base, method, body, origin string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/cast.v1."+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestLoginLinkSignsInOnceAndReachesTheSameHandlers(t *testing.T) {
	srv, auth := startWeb(t)
	base := srv.WebURL()
	link := loginLink(t, auth)
	if !strings.HasPrefix(link, base+"/auth/login?code=") {
		t.Fatalf("link %q is not under %s", link, base)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}

	// Before signing in: the same refusal a gRPC client without a token gets.
	if code, body := connectCall(t, browser, base, "AuthService/WhoAmI", "{}", base); code != http.StatusUnauthorized || !strings.Contains(body, "needs a credential") {
		t.Fatalf("WhoAmI without a session: %d %s", code, body)
	}
	resp := testharness.OpenLoginLink(t, browser, link)
	if resp.Request.URL.String() != base+"/" || resp.StatusCode != http.StatusOK {
		t.Fatalf("login landed on %s with %d; want the app at %s/", resp.Request.URL, resp.StatusCode, base)
	}
	cookies := jar.Cookies(resp.Request.URL)
	if len(cookies) != 1 {
		t.Fatalf("cookies after login: %v", cookies)
	}
	if code, body := connectCall(t, browser, base, "AuthService/WhoAmI", "{}", base); code != http.StatusOK || !strings.Contains(body, `"admin:`) {
		t.Fatalf("WhoAmI signed in: %d %s", code, body)
	}
	// A page elsewhere cannot use the cookie.
	if code, _ := connectCall(t, browser, base, "AuthService/WhoAmI", "{}", "http://evil.invalid"); code != http.StatusForbidden {
		t.Fatalf("cross-origin call: %d, want 403", code)
	}
	// The link worked once.
	again, err := (&http.Client{}).Get(link)
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusUnauthorized {
		t.Fatalf("second use of the link: %d, want 401", again.StatusCode)
	}
}

func TestAppIsServed(t *testing.T) {
	srv, _ := startWeb(t)
	resp, err := http.Get(srv.WebURL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "<title>cast</title>") {
		t.Fatalf("GET /: %d %.200s", resp.StatusCode, b)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("CSP %q", csp)
	}
}

// redirectOf is where GET u sends c (which must not follow redirects).
func redirectOf(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("GET %s: %d, want a redirect", u, resp.StatusCode)
	}
	return resp.Header.Get("Location")
}

// With --oidc-issuer, a browser signs in at the issuer (authorization code
// with PKCE) and is then the person the ID token names; the callback works
// only in the browser that started the sign-in.
func TestOIDCSignIn(t *testing.T) {
	iss := testharness.StartOIDCIssuer(t)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.Web.Listen, c.Web.Plain = "127.0.0.1:0", true
		c.Auth.OIDC.Issuer, c.Auth.OIDC.ClientID = iss.URL, "cast-web"
	})
	base := srv.WebURL()
	jar, _ := cookiejar.New(nil)
	stop := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	redirect := func(c *http.Client, u string) string { t.Helper(); return redirectOf(t, c, u) }
	resp, err := http.Get(base + "/auth/methods")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"oidc":true`) {
		t.Fatalf("/auth/methods: %s", b)
	}
	authURL := redirect(stop, base+"/auth/oidc")
	if !strings.HasPrefix(authURL, iss.URL+"/auth?") || !strings.Contains(authURL, "code_challenge_method=S256") ||
		!strings.Contains(authURL, "redirect_uri="+url.QueryEscape(base+"/auth/oidc/callback")) {
		t.Fatalf("sign-in goes to %s", authURL)
	}
	// The person approves at the issuer, which sends the browser back.
	callback := redirect(stop, authURL+"&email=alice@example.com")
	// Another browser cannot use that answer.
	if other, err := http.Get(callback); err != nil || other.StatusCode != http.StatusBadRequest {
		t.Fatalf("the callback in another browser: %v %v", other, err)
	} else {
		other.Body.Close()
	}
	browser := &http.Client{Jar: jar}
	land, err := browser.Get(callback)
	if err != nil {
		t.Fatal(err)
	}
	land.Body.Close()
	if land.StatusCode != http.StatusOK || land.Request.URL.String() != base+"/" {
		t.Fatalf("callback landed on %s with %d", land.Request.URL, land.StatusCode)
	}
	if code, body := connectCall(t, browser, base, "AuthService/WhoAmI", "{}", base); code != http.StatusOK || !strings.Contains(body, `"user:alice@example.com"`) {
		t.Fatalf("WhoAmI after OIDC sign-in: %d %s", code, body)
	}
	// A user sees only its own sessions: the same rule as the CLI's.
	if code, body := connectCall(t, browser, base, "AuthService/ListTokens", "{}", base); code != http.StatusForbidden || !strings.Contains(body, "may not call ListTokens") {
		t.Fatalf("a user listing tokens: %d %s", code, body)
	}
	// The code was redeemed once: replaying the callback fails.
	again, err := browser.Get(callback)
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusBadRequest {
		t.Fatalf("a replayed callback: %d", again.StatusCode)
	}
}

// Two control planes on one host, on two ports, each finish an OIDC
// sign-in a browser started on both: a browser keys cookies by host, not
// port, so one flow cookie name for both let starting the second sign-in
// replace the first's, whose callback was then refused ("not started in
// this browser").
func TestOIDCSignInsOnTwoPortsOfOneHost(t *testing.T) {
	iss := testharness.StartOIDCIssuer(t)
	jar, _ := cookiejar.New(nil)
	stop := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	redirect := func(u string) string { t.Helper(); return redirectOf(t, stop, u) }
	var bases, authURLs []string
	for range 2 { // both sign-ins started before either finishes
		srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
			c.Web.Listen, c.Web.Plain = "127.0.0.1:0", true
			c.Auth.OIDC.Issuer, c.Auth.OIDC.ClientID = iss.URL, "cast-web"
		})
		bases = append(bases, srv.WebURL())
		authURLs = append(authURLs, redirect(srv.WebURL()+"/auth/oidc"))
	}
	browser := &http.Client{Jar: jar}
	for i, who := range []string{"alice@example.com", "bob@example.com"} {
		callback := redirect(authURLs[i] + "&email=" + who)
		land, err := browser.Get(callback)
		if err != nil {
			t.Fatal(err)
		}
		land.Body.Close()
		if land.StatusCode != http.StatusOK {
			t.Fatalf("the sign-in on %s: %d", bases[i], land.StatusCode)
		}
		if code, body := connectCall(t, browser, bases[i], "AuthService/WhoAmI", "{}", bases[i]); code != http.StatusOK || !strings.Contains(body, `"user:`+who+`"`) {
			t.Fatalf("WhoAmI on %s: %d %s", bases[i], code, body)
		}
	}
}

// Sign-ins live in the store: a link one replica made works on another,
// and the browser's session is honoured by both.
func TestLoginLinkWorksOnAnotherReplica(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	replica := func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir = []string{ep}, ""
		c.Web.Listen, c.Web.Plain = "127.0.0.1:0", true
	}
	a := testharness.StartControlPlane(t, replica)
	b := testharness.StartControlPlane(t, replica)
	link := loginLink(t, testharness.DialServer(t, a).Auth)
	code := link[strings.Index(link, "?"):]
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp := testharness.OpenLoginLink(t, browser, b.WebURL()+"/auth/login"+code)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("replica b refused replica a's link: %d", resp.StatusCode)
	}
	// The cookie is b's listener's; a's gets the same session id (behind
	// the app's one address both would be one).
	u, _ := url.Parse(a.WebURL())
	for _, c := range jar.Cookies(resp.Request.URL) {
		if c.Name == web.SessionCookie(resp.Request.URL.Host, false) {
			jar.SetCookies(u, []*http.Cookie{{Name: web.SessionCookie(u.Host, false), Value: c.Value}})
		}
	}
	for _, base := range []string{a.WebURL(), b.WebURL()} {
		if code, body := connectCall(t, browser, base, "AuthService/WhoAmI", "{}", base); code != http.StatusOK || !strings.Contains(body, `"admin:`) {
			t.Fatalf("WhoAmI on %s: %d %s", base, code, body)
		}
	}
}

// An OIDC sign-in in progress is kept in the store: the issuer's redirect
// may come back to another replica behind the app's one address, which
// finishes it; the flow is then used up on both.
func TestOIDCSignInFinishesOnAnotherReplica(t *testing.T) {
	iss := testharness.StartOIDCIssuer(t)
	ep := testharness.StartEtcd(t, nil)
	listen, public := "127.0.0.1:0", ""
	replica := func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir = []string{ep}, ""
		c.Web.Listen, c.Web.Plain, c.Web.PublicURL = listen, true, public
		c.Auth.OIDC.Issuer, c.Auth.OIDC.ClientID = iss.URL, "cast-web"
	}
	a := testharness.StartControlPlane(t, replica)
	// Both replicas are known by a's address, as behind one load balancer;
	// b listens on its own.
	public, listen = a.WebURL(), testharness.FreeAddr(t)
	testharness.StartControlPlane(t, replica)
	jar, _ := cookiejar.New(nil)
	stop := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := stop.Get(a.WebURL() + "/auth/oidc")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	authURL := resp.Header.Get("Location")
	resp, err = stop.Get(authURL + "&email=bob@example.com")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	callback, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || callback.String() == "" {
		t.Fatalf("the issuer's redirect: %q, %v", resp.Header.Get("Location"), err)
	}
	// The load balancer sends the callback to b, with the browser's cookies.
	callback.Host = listen
	jar.SetCookies(callback, jar.Cookies(resp.Request.URL))
	browser := &http.Client{Jar: jar}
	land, err := browser.Get(callback.String())
	if err != nil {
		t.Fatal(err)
	}
	land.Body.Close()
	if land.StatusCode != http.StatusOK {
		t.Fatalf("replica b did not finish a's sign-in: %d", land.StatusCode)
	}
	onB := "http://" + listen
	if code, body := connectCall(t, browser, onB, "AuthService/WhoAmI", "{}", onB); code != http.StatusOK || !strings.Contains(body, `"user:bob@example.com"`) {
		t.Fatalf("WhoAmI on b after the sign-in: %d %s", code, body)
	}
	// Used up: the same callback at a fails.
	onA, _ := url.Parse(a.WebURL())
	callback.Host = onA.Host
	again, err := browser.Get(callback.String())
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusBadRequest {
		t.Fatalf("the callback replayed at a: %d", again.StatusCode)
	}
}

// Opening a login link does not sign the browser in by itself: a link an
// attacker sent (their own) would otherwise sign the victim in as the
// attacker, who then reads what the victim does there (login CSRF). The
// link shows whom it signs in as and asks; the sign-in is a POST from
// that page (same origin), which a page elsewhere cannot make.
func TestLoginLinkAsksBeforeSigningIn(t *testing.T) {
	srv, auth := startWeb(t)
	base := srv.WebURL()
	link := loginLink(t, auth)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(jar.Cookies(resp.Request.URL)) != 0 {
		t.Fatalf("opening the link: %d with cookies %v; want the question, not a session", resp.StatusCode, jar.Cookies(resp.Request.URL))
	}
	for _, want := range []string{`method="post"`, `action="/auth/login"`, "admin:"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page does not say %q:\n%s", want, page)
		}
	}
	// Under no-referrer a browser sends its form's POST with "Origin:
	// null", which the sign-in refuses (a real Chromium did:
	// TestWebTimeline).
	if rp := resp.Header.Get("Referrer-Policy"); rp != "same-origin" {
		t.Errorf("the page's Referrer-Policy is %q; its form's POST needs its origin (same-origin)", rp)
	}
	code := strings.TrimPrefix(link, base+"/auth/login?code=")
	form := url.Values{"code": {code}}.Encode()
	post := func(origin string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/auth/login", strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// A page elsewhere posting the code is refused, and the code still works.
	if resp := post("http://evil.invalid"); resp.StatusCode != http.StatusForbidden || len(jar.Cookies(resp.Request.URL)) != 0 {
		t.Fatalf("a cross-site sign-in: %d", resp.StatusCode)
	}
	resp = post(base)
	if resp.Request.URL.String() != base+"/" || resp.StatusCode != http.StatusOK || len(jar.Cookies(resp.Request.URL)) != 1 {
		t.Fatalf("the sign-in from the page landed on %s with %d", resp.Request.URL, resp.StatusCode)
	}
	if code, body := connectCall(t, browser, base, "AuthService/WhoAmI", "{}", base); code != http.StatusOK || !strings.Contains(body, `"admin:`) {
		t.Fatalf("WhoAmI signed in: %d %s", code, body)
	}
}

// Behind a TLS proxy (an https --web-url before a plain listener, which
// sees the browser's requests with their Host) the browser reaches the app
// over HTTPS, so the cookies it gets are Secure: without it the session
// cookie would also go, in clear, with a request to the host's plain
// http:// address (a cookie is bound to neither port nor scheme).
func TestCookiesAreSecureBehindAnHTTPSProxy(t *testing.T) {
	iss := testharness.StartOIDCIssuer(t)
	const public = "https://cast.example.com"
	listen := testharness.FreeAddr(t)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.Web.Listen, c.Web.Plain, c.Web.PublicURL = listen, true, public
		c.Auth.OIDC.Issuer, c.Auth.OIDC.ClientID = iss.URL, "cast-web"
	})
	link := loginLink(t, testharness.DialServer(t, srv).Auth)
	code := strings.TrimPrefix(link, public+"/auth/login?code=")
	// What the proxy hands the listener: the browser's request.
	proxied := func(method, path, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+listen+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "cast.example.com"
		req.Header.Set("Origin", public)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		stop := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := stop.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		what, method, path, body, cookie string
	}{
		{"the login link's sign-in", http.MethodPost, "/auth/login", url.Values{"code": {code}}.Encode(), web.SessionCookie("cast.example.com", true)},
		{"an OIDC sign-in's start", http.MethodGet, "/auth/oidc", "", "cast_web_oidc"},
	} {
		resp := proxied(tc.method, tc.path, tc.body)
		var got *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == tc.cookie {
				got = c
			}
		}
		if got == nil {
			t.Errorf("%s: %d without a %s cookie", tc.what, resp.StatusCode, tc.cookie)
		} else if !got.Secure {
			t.Errorf("%s over %s: cookie %s is not Secure", tc.what, public, got)
		}
	}
}
