package client

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestResolveContexts(t *testing.T) {
	home := t.TempDir()
	xdg := t.TempDir()
	env := map[string]string{"HOME": home}
	getenv := func(k string) string { return env[k] }
	path := ConfigPath(getenv)
	if path != filepath.Join(home, ".config", "cast", "config.yaml") {
		t.Fatalf("path %s", path)
	}
	env["XDG_CONFIG_HOME"] = xdg
	path = ConfigPath(getenv)
	if path != filepath.Join(xdg, "cast", "config.yaml") {
		t.Fatalf("XDG path %s", path)
	}
	if got, err := Resolve(getenv, "", ""); err != nil || got.Addr != DefaultAddr || got.Token != "" {
		t.Fatalf("no file: %+v %v", got, err)
	}
	if err := SetContext(path, "prod", Context{Addr: "10.0.0.1:7777", Token: "tok-prod"}); err != nil {
		t.Fatal(err)
	}
	helper := []string{"/bin/oidc-helper", "get", "--aud=cast"}
	if err := SetContext(path, "sso", Context{Addr: "10.0.0.2:7777", TokenCommand: helper}); err != nil {
		t.Fatal(err)
	}
	if err := SetContext(path, "both", Context{Addr: "10.0.0.3:7777", Token: "t", TokenCommand: helper}); err != nil {
		t.Fatal(err)
	}
	if err := SetContext(path, "dev", Context{Addr: "127.0.0.1:7777", Token: "tok-dev"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config mode: %v %v", fi, err)
	}
	tokFile := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tokFile, []byte(strings.Repeat("f", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, ctx, flag string
		env             map[string]string
		want            Context
	}{
		{"current", "", "", nil, Context{Addr: "127.0.0.1:7777", ctxName: "dev", Token: "tok-dev"}},
		{"--context", "prod", "", nil, Context{Addr: "10.0.0.1:7777", ctxName: "prod", Token: "tok-prod"}},
		{"CAST_CONTEXT", "", "", map[string]string{"CAST_CONTEXT": "prod"}, Context{Addr: "10.0.0.1:7777", ctxName: "prod", Token: "tok-prod"}},
		{"env overrides", "prod", "", map[string]string{"CAST_ADDR": "a:1", "CAST_TOKEN": "t"}, Context{Addr: "a:1", Token: "t"}},
		{"flag beats env; no context token to another address", "", "b:2", map[string]string{"CAST_ADDR": "a:1"}, Context{Addr: "b:2"}},
		{"same address keeps the context token", "", "127.0.0.1:7777", nil, Context{Addr: "127.0.0.1:7777", ctxName: "dev", Token: "tok-dev"}},
		{"token file", "", "", map[string]string{"CAST_TOKEN_FILE": tokFile}, Context{Addr: "127.0.0.1:7777", ctxName: "dev", Token: strings.Repeat("f", 40)}},
		{"CA file", "", "", map[string]string{"CAST_CACERT": "/ca.pem"}, Context{Addr: "127.0.0.1:7777", ctxName: "dev", Token: "tok-dev", CA: "/ca.pem"}},
		{"CA pin", "", "", map[string]string{"CAST_CA_PIN": "sha256:ab"}, Context{Addr: "127.0.0.1:7777", ctxName: "dev", Token: "tok-dev", CAPin: "sha256:ab"}},
		{"token-command", "sso", "", map[string]string{"HOME": home}, Context{Addr: "10.0.0.2:7777", ctxName: "sso", TokenCommand: helper,
			tokenCache: filepath.Join(home, ".cache", "cast", "tokens")}},
		{"token-command, XDG cache", "sso", "", map[string]string{"XDG_CACHE_HOME": "/c"}, Context{Addr: "10.0.0.2:7777", ctxName: "sso", TokenCommand: helper,
			tokenCache: "/c/cast/tokens"}},
		{"CAST_TOKEN beats token-command", "sso", "", map[string]string{"CAST_TOKEN": "t"}, Context{Addr: "10.0.0.2:7777", ctxName: "sso", Token: "t"}},
		{"no token-command to another address", "sso", "a:1", nil, Context{Addr: "a:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{"XDG_CONFIG_HOME": xdg}
			for k, v := range tc.env {
				e[k] = v
			}
			got, err := Resolve(func(k string) string { return e[k] }, tc.ctx, tc.flag)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := Resolve(getenv, "nope", ""); err == nil {
		t.Error("an unknown context resolved")
	}
	if _, err := Resolve(getenv, "both", ""); err == nil || !strings.Contains(err.Error(), "both token and token-command") {
		t.Errorf("a context with a token and a token-command: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(getenv, "", ""); err == nil {
		t.Error("a world-readable config with tokens was read")
	}
}

// A token never goes in clear off this machine unless asked: refused
// before anything is dialed.
func TestPlaintextOnlyOnLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr     string
		insecure bool
		ok       bool
	}{
		{"127.0.0.1:7777", false, true},
		{"[::1]:7777", false, true},
		{"localhost:7777", false, true},
		{"192.0.2.1:7777", false, false},
		{"cp.example:7777", false, false},
		{"cp.example:7777", true, true},
	} {
		_, err := Context{Addr: tc.addr, Token: "t", Insecure: tc.insecure}.Dial()
		if (err == nil) != tc.ok {
			t.Errorf("%s insecure=%v: %v, want ok=%v", tc.addr, tc.insecure, err, tc.ok)
		}
	}
	if err := CheckPlaintext("192.0.2.1:7777", &tls.Config{}, false); err != nil {
		t.Errorf("with TLS: %v", err)
	}
}

// Processes changing the contexts file at once (two `cast` refreshing
// OIDC logins of different contexts, say) lose none of each other's
// changes: each read-modify-write holds the file's lock, so a rotated
// refresh token written by one is not overwritten with the stale copy
// another read before it.
func TestConcurrentContextUpdatesAreNotLost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	const n = 24
	for i := range n {
		if err := SetContext(path, fmt.Sprintf("c%d", i), Context{Addr: "127.0.0.1:1", Token: "old"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := UpdateContext(path, fmt.Sprintf("c%d", i), func(c *Context) { c.Token = "rotated" }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for i := range n {
		if name := fmt.Sprintf("c%d", i); cfg.Contexts[name].Token != "rotated" {
			lost = append(lost, name)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("updates lost for %v", lost)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("contexts file: %v %v", fi, err)
	}
}
