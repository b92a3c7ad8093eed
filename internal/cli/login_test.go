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
	var out bytes.Buffer
	var errOut testharness.LockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(context.Background(), append([]string{"login"}, args...), strings.NewReader(""), &out, &errOut)
	}()
	codeRE := regexp.MustCompile(`open (\S+) and enter the code (\S+)`)
	var m []string
	testharness.WaitFor(t, 20*time.Second, "the login prompt", func() bool {
		m = codeRE.FindStringSubmatch(errOut.String())
		return m != nil
	})
	if !strings.HasPrefix(m[1], iss.URL) {
		t.Fatalf("login sends the person to %s, not the issuer %s", m[1], iss.URL)
	}
	resp, err := http.Get(m[1] + "?" + url.Values{"user_code": {m[2]}, "email": {email}}.Encode())
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("approving %s: %v %v", m[2], err, resp)
	}
	resp.Body.Close()
	code := <-done
	return out.String(), errOut.String(), code
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
		{[]string{"login"}, 2, "which context?"},
		{[]string{"config", "set-context", "work", "--addr", srv.Addr()}, 0, ""},
		{[]string{"login", "--context", "nope"}, 1, `no context "nope"`},
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
