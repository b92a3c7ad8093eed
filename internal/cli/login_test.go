package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/testharness"
)

// login runs `cast login args...` and plays the person: it reads the
// code the CLI prints and approves it at the fake issuer as email.
func login(t *testing.T, iss *testharness.OIDCIssuer, email string, args ...string) (string, string, int) {
	t.Helper()
	return playLogin(t, args, func(errOut string) bool {
		m := regexp.MustCompile(`open (\S+) and enter the code (\S+)`).FindStringSubmatch(errOut)
		if m == nil {
			return false
		}
		if !strings.HasPrefix(m[1], iss.URL) {
			t.Fatalf("login sends the person to %s, not the issuer %s", m[1], iss.URL)
		}
		approve(t, m[1]+"?"+url.Values{"user_code": {m[2]}, "email": {email}}.Encode())
		return true
	})
}

// browserLogin is login with --grant-type authcode: the person opens the
// printed URL in a browser (an HTTP client that follows the issuer's
// redirect back to cast's loopback listener), approving as email.
func browserLogin(t *testing.T, iss *testharness.OIDCIssuer, email string, args ...string) (string, string, int) {
	t.Helper()
	return playLogin(t, append([]string{"--grant-type", "authcode"}, args...), func(errOut string) bool {
		m := regexp.MustCompile(`open this URL in a browser on this machine:\n(\S+)`).FindStringSubmatch(errOut)
		if m == nil {
			return false
		}
		if !strings.HasPrefix(m[1], iss.URL+"/auth?") || !strings.Contains(m[1], "code_challenge_method=S256") {
			t.Fatalf("login sends the browser to %s: not the issuer's authorization endpoint with a PKCE challenge", m[1])
		}
		auth, err := url.Parse(m[1])
		if err != nil {
			t.Fatal(err)
		}
		// Another page's redirect (a wrong state) is refused and the
		// login goes on waiting for its own.
		forged := auth.Query().Get("redirect_uri") + "?" + url.Values{"code": {"ac-forged"}, "state": {"not-this-login"}}.Encode()
		if resp, err := http.Get(forged); err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("a redirect with another state: %v %v", err, resp)
		} else {
			resp.Body.Close()
		}
		approve(t, m[1]+"&"+url.Values{"email": {email}}.Encode())
		return true
	})
}

// playLogin runs `cast login args...` and calls act with its stderr until
// act finds the prompt and plays the person.
func playLogin(t *testing.T, args []string, act func(errOut string) bool) (string, string, int) {
	t.Helper()
	var out bytes.Buffer
	var errOut testharness.LockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(context.Background(), append([]string{"login"}, args...), strings.NewReader(""), &out, &errOut)
	}()
	testharness.WaitFor(t, 20*time.Second, "the login prompt", func() bool { return act(errOut.String()) })
	code := <-done
	return out.String(), errOut.String(), code
}

func approve(t *testing.T, page string) {
	t.Helper()
	resp, err := http.Get(page)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("approving at %s: %v %v", page, err, resp)
	}
	resp.Body.Close()
}

// `cast login` against a fake issuer on 127.0.0.1 and a real control
// plane trusting it: the device grant's ID token and refresh token land in
// the context (0600), commands then act as the OIDC user, and a token
// near its exp is refreshed and the new pair stored.
func TestLogin(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("CAST_TOKEN", "") // the context's credential, not the harness's
	t.Setenv("CAST_ADDR", "")
	path := filepath.Join(dir, "cast", "config.yaml")
	iss := testharness.StartOIDCIssuer(t)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.Auth.OIDC.Issuer, c.Auth.OIDC.ClientID = iss.URL, "cast"
	})

	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"login"}, 2, "no context in "},
		{[]string{"config", "set-context", "work", "--addr", srv.Addr()}, 0, ""},
		{[]string{"login", "--context", "nope"}, 2, `no context "nope"`},
		{[]string{"login", "--context", "work"}, 2, "--issuer URL and --client-id ID are needed"},
		{[]string{"login", "--context", "work", "--issuer", "http://accounts.example.com", "--client-id", "cast"}, 2, "must be https"},
		{[]string{"config", "use-context", "work"}, 0, ""},
		{[]string{"token", "whoami"}, 1, ""}, // no credential yet
	} {
		if _, errOut, code := runBare(tc.args...); code != tc.code || !strings.Contains(errOut, tc.err) {
			t.Fatalf("cast %v: exit %d %q, want %d %q", tc.args, code, errOut, tc.code, tc.err)
		}
	}

	out, errOut, code := login(t, iss, "alice@example.com", "--issuer", iss.URL, "--client-id", "cast")
	if code != 0 || !strings.Contains(out, `logged in to context "work" as alice@example.com`) {
		t.Fatalf("login: exit %d %q %q", code, out, errOut)
	}
	cfg, err := client.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	work := cfg.Contexts["work"]
	if work.OIDC == nil || work.OIDC.Issuer != iss.URL || work.OIDC.ClientID != "cast" || work.OIDC.RefreshToken == "" || strings.Count(work.Token, ".") != 2 {
		t.Fatalf("stored login: %+v %+v", work, work.OIDC)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("contexts file: %v %v", fi.Mode(), err)
	}
	if out := mustBare(t, "token", "whoami"); !strings.Contains(out, "user:alice@example.com") {
		t.Errorf("after login, whoami: %q", out)
	}
	if out := mustBare(t, "config", "get-contexts", "-o", "wide"); !strings.Contains(out, "oidc") || strings.Contains(out, work.Token) || strings.Contains(out, work.OIDC.RefreshToken) {
		t.Errorf("get-contexts -o wide: %q", out)
	}

	// A second login reuses the context's issuer and client; its tokens
	// last 30s, inside the margin, so the next command refreshes.
	iss.SetLoginTTL(30 * time.Second)
	if out, errOut, code := login(t, iss, "alice@example.com"); code != 0 {
		t.Fatalf("second login: exit %d %q %q", code, out, errOut)
	}
	before, _ := client.LoadConfig(path)
	if out := mustBare(t, "token", "whoami"); !strings.Contains(out, "user:alice@example.com") || iss.Refreshes() != 1 {
		t.Errorf("whoami near exp: %q, %d refreshes", out, iss.Refreshes())
	}
	after, _ := client.LoadConfig(path)
	if b, a := before.Contexts["work"], after.Contexts["work"]; a.OIDC.RefreshToken == b.OIDC.RefreshToken || strings.Count(a.Token, ".") != 2 {
		t.Errorf("the refreshed login was not stored: refresh %q -> %q", b.OIDC.RefreshToken, a.OIDC.RefreshToken)
	}
}

func mustBare(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runBare(args...)
	if code != 0 {
		t.Fatalf("cast %v: exit %d %q", args, code, errOut)
	}
	return out
}

// The authorization code grant with PKCE: cast prints the issuer's URL,
// the browser comes back to cast's loopback listener with the code, cast
// redeems it with the verifier (the fake issuer refuses a code whose
// verifier does not match its challenge), and the login is stored as the
// device grant's is.
func TestLoginAuthCode(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("CAST_TOKEN", "")
	t.Setenv("CAST_ADDR", "")
	iss := testharness.StartOIDCIssuer(t)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.Auth.OIDC.Issuer, c.Auth.OIDC.ClientID = iss.URL, "cast"
	})
	mustBare(t, "config", "set-context", "work", "--addr", srv.Addr())
	mustBare(t, "config", "use-context", "work")
	if _, errOut, code := runBare("login", "--grant-type", "password", "--issuer", iss.URL, "--client-id", "cast"); code != 2 || !strings.Contains(errOut, "use one of auto, authcode, device-code") {
		t.Fatalf("--grant-type password: exit %d %q", code, errOut)
	}
	out, errOut, code := browserLogin(t, iss, "bob@example.com", "--issuer", iss.URL, "--client-id", "cast")
	if code != 0 || !strings.Contains(out, `logged in to context "work" as bob@example.com`) {
		t.Fatalf("login: exit %d %q %q", code, out, errOut)
	}
	cfg, err := client.LoadConfig(filepath.Join(dir, "cast", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Contexts["work"]; w.OIDC == nil || w.OIDC.RefreshToken == "" || strings.Count(w.Token, ".") != 2 {
		t.Fatalf("stored login: %+v", w)
	}
	if out := mustBare(t, "token", "whoami"); !strings.Contains(out, "user:bob@example.com") {
		t.Errorf("after login, whoami: %q", out)
	}
}
