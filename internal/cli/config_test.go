package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/testharness"
)

// runBare runs the CLI in process with no --addr: what the contexts file
// says is what it uses.
func runBare(args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

// `cast config` command by command over a scratch contexts file: the file
// stays 0600, tokens never show, and use-context decides which control
// plane a later command calls (a real one).
func TestConfigContexts(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("CAST_ADDR", "")
	path := filepath.Join(dir, "cast", "config.yaml")
	srv := testharness.StartControlPlane(t, nil)
	tokFile := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tokFile, []byte("cast_SECRETVALUE0123456789abcdef0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		out  string // stdout contains it
		err  string // stderr contains it
	}{
		{[]string{"config", "current-context"}, 1, "", "no current context"},
		{[]string{"config", "get-contexts"}, 0, "NAME", "no contexts"},
		{[]string{"config", "set-context", "dev"}, 2, "", `context "dev" needs an address: give --addr HOST:PORT`}, // a flag left out, as any required one
		{[]string{"config", "set-context", "dev", "--addr", "nohostport"}, 2, "", "not HOST:PORT"},
		{[]string{"config", "set-context", "../x", "--addr", "127.0.0.1:1"}, 2, "", "not valid"},
		{[]string{"config", "set-context", "dev", "--addr", "127.0.0.1:1", "--token-file", tokFile, "--token-command", "x"}, 2, "", "one way"},
		{[]string{"config", "set-context", "dev", "--addr", srv.Addr(), "--token-file", tokFile, "--node", "mybox"}, 0, `made context "dev"`, ""},
		{[]string{"config", "set-context", "work", "--addr", "cast.example.com:7777", "--token-command", "my-helper get-token"}, 0, `made context "work"`, ""},
		{[]string{"config", "current-context"}, 1, "", "no current context"},
		{[]string{"config", "use-context", "nope"}, 2, "", `no context "nope" in ` + path + `; it has dev, work`},
		{[]string{"--context", "nope", "ls"}, 2, "", `no context "nope" in ` + path + `; it has dev, work`},
		{[]string{"config", "use-context", "dev"}, 0, `switched to context "dev"`, ""},
		{[]string{"config", "current-context"}, 0, "dev\n", ""},
		{[]string{"config", "get-contexts"}, 0, "NAME", ""},
		{[]string{"config", "get-contexts", "-o", "name"}, 0, "dev\nwork\n", ""},
		{[]string{"config", "get-contexts", "-o", "wide", "--no-headers"}, 0, "token-command", ""},
		{[]string{"config", "get-contexts", "-o", "yaml"}, 0, "current: true", ""},
		{[]string{"config", "get-contexts", "-o", "bogus"}, 2, "", "not an output format"},
		{[]string{"config", "get-contexts", "nope"}, 2, "", `no context "nope" in ` + path + `; it has dev, work`},
		{[]string{"config", "set-context", "dev", "--node="}, 0, `changed context "dev"`, ""},
		// The current context is the real control plane: a call reaches it.
		{[]string{"nodes", "-o", "json"}, 0, `"nodes"`, ""},
		{[]string{"config", "use-context", "work"}, 0, "", ""},
		{[]string{"config", "current-context"}, 0, "work\n", ""},
		// A remote context with no CA: the fix is named in cast's own
		// terms (not a node's --ca-pin or --insecure, which cast lacks).
		{[]string{"nodes"}, 1, "", "`cast config set-context work --ca-pin sha256:...`"},
	} {
		out, errOut, code := runBare(tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.err) {
			t.Errorf("cast %v: exit %d, stdout %q, stderr %q; want exit %d, %q, %q", tc.args, code, out, errOut, tc.code, tc.out, tc.err)
		}
		if strings.Contains(out+errOut, "SECRETVALUE") {
			t.Errorf("cast %v printed the token", tc.args)
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("after cast %v the contexts file is %v, want 0600", tc.args, fi.Mode().Perm())
		}
	}

	// Context names complete from the file, for the commands and --context.
	for _, args := range [][]string{{"config", "use-context", "w"}, {"config", "get-contexts", "dev", "w"}, {"--context", "w"}} {
		if got := complete(t, srv.Addr(), args...); !slices.Equal(got, []string{"work"}) {
			t.Errorf("complete %q: %q", args, got)
		}
	}

	// The table: NAME ADDR NODE CURRENT, * on the current one.
	out, _, _ := runBare("config", "get-contexts")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME ADDR NODE CURRENT" ||
		strings.Join(strings.Fields(lines[2]), " ") != "work cast.example.com:7777 *" {
		t.Errorf("get-contexts table:\n%s", out)
	}
	var got struct {
		Contexts []contextView `json:"contexts"`
	}
	jsonOut, _, _ := runBare("config", "get-contexts", "-o", "json")
	if err := json.Unmarshal([]byte(jsonOut), &got); err != nil || len(got.Contexts) != 2 ||
		got.Contexts[0] != (contextView{Name: "dev", Addr: srv.Addr(), Auth: "token"}) {
		t.Errorf("get-contexts -o json: %v %s", err, jsonOut)
	}
	cfg, err := client.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if dev := cfg.Contexts["dev"]; dev.Token != "cast_SECRETVALUE0123456789abcdef0123456789" || dev.Node != "" || cfg.CurrentContext != "work" ||
		strings.Join(cfg.Contexts["work"].TokenCommand, " ") != "my-helper get-token" {
		t.Errorf("stored contexts: current %q, dev %+v, work %+v", cfg.CurrentContext, *dev, *cfg.Contexts["work"])
	}
}
