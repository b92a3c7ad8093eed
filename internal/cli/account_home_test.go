package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// `cast account add --from-home DIR` takes the agent's current login from
// its config folder (CLAUDE_CONFIG_DIR or CODEX_HOME layout), says custody
// moves to cast and what the folder must do, and with --release-home
// rewrites the folder's login without its refresh token (0600). No token
// is ever printed. Bad folders are refused before anything is stored.
func TestAccountAddFromHome(t *testing.T) {
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	exp := time.Now().Add(time.Hour)
	homes := map[string]struct{ file, body, refresh string }{
		"claude": {".credentials.json", fmt.Sprintf(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-HOMEACCESS","refreshToken":"sk-ant-ort01-HOMEREFRESH","expiresAt":%d,"scopes":["user:inference"]}}`, exp.UnixMilli()), "sk-ant-ort01-HOMEREFRESH"},
		"codex":  {"auth.json", `{"OPENAI_API_KEY":null,"tokens":{"id_token":"a.b.c","access_token":"eyJ.HOMEACCESS.sig","refresh_token":"rt-HOMEREFRESH","account_id":"acct"},"last_refresh":"2026-01-01T00:00:00Z"}`, "rt-HOMEREFRESH"},
	}
	for agent, h := range homes {
		t.Run(agent, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, h.file)
			if err := os.WriteFile(path, []byte(h.body), 0o600); err != nil {
				t.Fatal(err)
			}
			out, errOut, err := runSubcommand(srv.Addr(), false, (*app).accountAddCmd, "kept-"+agent, "--agent", agent, "--from-home", dir)
			if err != nil {
				t.Fatalf("add --from-home: %v\n%s", err, errOut)
			}
			for _, want := range []string{"stored " + agent + " account kept-" + agent, "custody of this login moved to cast", "revoke each other", "--release-home"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if b, _ := os.ReadFile(path); string(b) != h.body {
				t.Fatal("without --release-home the folder's login changed")
			}

			out, _, err = runSubcommand(srv.Addr(), true, (*app).accountAddCmd, "moved-"+agent, "--agent", agent, "--from-home", dir, "--release-home")
			if err != nil {
				t.Fatal(err)
			}
			var res struct {
				Custody  string `json:"custody"`
				Released bool   `json:"home_released"`
				Notice   string `json:"notice"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil || res.Custody != "cast" || !res.Released || !strings.Contains(res.Notice, "access token only") {
				t.Fatalf("--json: %v\n%s", err, out)
			}
			b, _ := os.ReadFile(path)
			fi, _ := os.Stat(path)
			if strings.Contains(string(b), h.refresh) || !strings.Contains(string(b), "HOMEACCESS") || fi.Mode().Perm() != 0o600 {
				t.Fatalf("released login (mode %v) still refreshes or lost its access token: %s", fi.Mode().Perm(), b)
			}
			if strings.Contains(out, "HOMEACCESS") || strings.Contains(out, h.refresh) {
				t.Fatal("a token reached the output")
			}
			resp, err := c.Accounts.ListAccounts(context.Background(), &castv1.ListAccountsRequest{Agent: agent})
			if err != nil || len(resp.Accounts) != 2 {
				t.Fatalf("accounts stored: %v %v", resp, err)
			}
		})
	}

	empty := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"x", "--agent", "claude", "--from-home", filepath.Join(empty, "nope")}, "is not a folder"},
		{[]string{"x", "--agent", "claude", "--from-home", empty}, "holds no claude login"},
		{[]string{"x", "--agent", "gemini", "--from-home", empty}, "do not cover gemini"},
		{[]string{"x", "--agent", "claude", "--from-home", empty, "--credentials", "f"}, "one of --credentials or --from-home"},
		{[]string{"x", "--agent", "claude", "--credentials", "f", "--release-home"}, "--release-home needs --from-home"},
	} {
		_, _, err := runSubcommand(srv.Addr(), false, (*app).accountAddCmd, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
}
