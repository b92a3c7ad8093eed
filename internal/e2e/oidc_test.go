package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/testharness"
)

// OIDC through the real binaries: controlplane --oidc-* trusts a fake
// issuer on 127.0.0.1, and cast gets its ID token from a context's
// token-command (run without a shell, once per token: later commands read
// the cache). The OIDC user sees only its own sessions, the admin group
// is admin, a cached token the control plane refuses is fetched again,
// CAST_TOKEN still wins, a failing helper is a clear error, and a cast
// watch rides out its ID token's exp.
func TestOIDCThroughRealProcesses(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	iss := testharness.StartOIDCIssuer(t)
	dataDir, addr := t.TempDir(), freeAddr(t)
	testharness.StartProc(t, filepath.Join(bins, "controlplane"), "--data-dir", dataDir, "--listen", addr,
		"--metrics-listen", "", "--oidc-issuer", iss.URL, "--oidc-client-id", "cast", "--oidc-admin-group", "cast-admins")
	admin := cli{t: t, bin: filepath.Join(bins, "cast"), env: []string{"CAST_ADDR=" + addr}} // the harness's admin token
	testharness.StartProc(t, filepath.Join(bins, "node"), "--controlplane", addr, "--data-dir", t.TempDir(), "--name", "n1",
		"--cast-bin", "", "--agents-config", missingAgentsConfig(t))
	admin.waitNode("n1", true)

	// The helper prints DIR/token-<its first argument> and counts its runs.
	dir := t.TempDir()
	helper := filepath.Join(dir, "oidc-helper")
	script := fmt.Sprintf("#!/bin/sh\necho run >> %[1]s/runs\ncat \"%[1]s/token-$1\"\n", dir)
	if err := os.WriteFile(helper, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	runs := func() int { b, _ := os.ReadFile(filepath.Join(dir, "runs")); return strings.Count(string(b), "run") }
	for who, groups := range map[string][]string{"alice": {"dev"}, "carol": {"cast-admins"}} {
		c := iss.Claims(who+"@example.com", "cast", time.Hour)
		c["groups"] = groups
		if err := os.WriteFile(filepath.Join(dir, "token-"+who), []byte(iss.Token(t, c)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfgHome := t.TempDir()
	cfgPath := client.ConfigPath(func(k string) string { return map[string]string{"XDG_CONFIG_HOME": cfgHome}[k] })
	for _, ctx := range []struct {
		name string
		argv []string
	}{{"carol", []string{helper, "carol"}}, {"broken", []string{"/bin/false"}}, {"alice", []string{helper, "alice"}}} {
		if err := client.SetContext(cfgPath, ctx.name, client.Context{Addr: addr, TokenCommand: ctx.argv}); err != nil {
			t.Fatal(err)
		}
	}
	cacheHome := t.TempDir()
	env := []string{"CAST_TOKEN=", "CAST_ADDR=", "XDG_CONFIG_HOME=" + cfgHome, "XDG_CACHE_HOME=" + cacheHome}
	alice := cli{t: t, bin: admin.bin, env: env} // the current context
	if out := alice.must("token", "whoami"); strings.TrimSpace(out) != "user:alice@example.com" {
		t.Errorf("whoami through token-command: %q", out)
	}
	newSession := func(c cli, title string) string {
		var s struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(c.must("new", "--agent", "claude", "--json", title)), &s); err != nil || s.ID == "" {
			t.Fatalf("cast new: %v", err)
		}
		return s.ID
	}
	mine, admins := newSession(alice, "alice's work"), newSession(admin, "admin's work")
	if out := alice.must("ls", "--json"); !strings.Contains(out, mine) || strings.Contains(out, admins) {
		t.Errorf("alice's cast ls, want %s and not %s:\n%s", mine, admins, out)
	}
	if _, errOut, code := alice.run("read", admins); code == 0 || !strings.Contains(errOut, "may not use session") {
		t.Errorf("alice reads the admin's session: exit %d, %s", code, errOut)
	}
	if n := runs(); n != 1 {
		t.Errorf("the helper ran %d times for five commands, want once (cached until exp)", n)
	}
	// A cached token the control plane refuses (its issuer's keys
	// rotated, say) is dropped: the next command runs the helper again.
	cached, _ := filepath.Glob(filepath.Join(cacheHome, "cast", "tokens", "*.json"))
	if len(cached) != 1 {
		t.Fatalf("token cache files: %v", cached)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rotated := testharness.SignJWT(t, other, iss.Kid, iss.Claims("alice@example.com", "cast", time.Hour))
	if err := os.WriteFile(cached[0], fmt.Appendf(nil, `{"token":%q,"exp":%d}`, rotated, time.Now().Add(time.Hour).Unix()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := alice.run("token", "whoami"); code == 0 || !strings.Contains(errOut, "failed to verify signature") {
		t.Errorf("a refused cached token: exit %d, %s", code, errOut)
	}
	if out := alice.must("token", "whoami"); strings.TrimSpace(out) != "user:alice@example.com" || runs() != 2 {
		t.Errorf("after a refused cached token: %q, helper runs %d, want 2", out, runs())
	}
	// The admin group; CAST_TOKEN beats the context's token-command.
	carol := cli{t: t, bin: admin.bin, env: append(env, "CAST_CONTEXT=carol")}
	if out := carol.must("token", "whoami"); strings.TrimSpace(out) != "admin:carol@example.com" {
		t.Errorf("whoami in the admin group: %q", out)
	}
	if out := carol.must("ls", "--json"); !strings.Contains(out, admins) || !strings.Contains(out, mine) {
		t.Errorf("an admin's cast ls, want every session:\n%s", out)
	}
	withEnv := cli{t: t, bin: admin.bin, env: append(env, "CAST_TOKEN="+testharness.AdminToken())}
	if out := withEnv.must("token", "whoami"); strings.TrimSpace(out) != "admin:admin" {
		t.Errorf("whoami with CAST_TOKEN: %q", out)
	}
	if n := runs(); n != 3 {
		t.Errorf("helper runs %d, want 3 (once more for carol; none with CAST_TOKEN)", n)
	}
	if _, errOut, code := alice.run("--context", "broken", "ls"); code == 0 || !strings.Contains(errOut, "token-command /bin/false failed") {
		t.Errorf("a failing token-command: exit %d, %s", code, errOut)
	}

	// A cast watch outlives its ID token: the control plane ends the
	// stream the token opened at its exp, and cast watch opens it again
	// with the helper's next token (its own cache, so it starts on the
	// short-lived one).
	writeToken := func(ttl time.Duration) {
		if err := os.WriteFile(filepath.Join(dir, "token-alice"), []byte(iss.Token(t, iss.Claims("alice@example.com", "cast", ttl))+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeToken(10 * time.Second)
	watch := testharness.StartProcEnv(t, append(env[:len(env):len(env)], "XDG_CACHE_HOME="+t.TempDir()), admin.bin, "watch", mine)
	testharness.WaitFor(t, 30*time.Second, "cast watch shows alice's session", func() bool { return strings.Contains(watch.Output(), mine) })
	writeToken(time.Hour)
	testharness.WaitFor(t, 30*time.Second, "the watch stream ends at its token's exp", func() bool { return strings.Contains(watch.Output(), "expired") })
	admin.must("send", "-s", mine, "MARK-AFTER-EXP")
	testharness.WaitFor(t, 30*time.Second, "cast watch shows a message sent after the exp", func() bool { return strings.Contains(watch.Output(), "MARK-AFTER-EXP") })
	if code, exited := watch.Wait(0); exited {
		t.Fatalf("cast watch exited (%d):\n%s", code, watch.Output())
	}
}
