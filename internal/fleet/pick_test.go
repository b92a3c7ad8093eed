package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/quota"
)

func TestPick(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	acc := func(name string, limitedFor, limitedAgo time.Duration) *quota.Account {
		a := &quota.Account{Name: name}
		if limitedFor != 0 {
			a.LimitedUntil = now.Add(limitedFor)
		}
		if limitedAgo != 0 {
			a.LastLimited = now.Add(-limitedAgo)
		}
		return a
	}
	usage := func(a *quota.Account, pct float64, resetsIn time.Duration) *quota.Account {
		a.Usage = []quota.Window{{Name: "primary", UsedPercent: pct, WindowMinutes: 300, ResetsAt: now.Add(resetsIn)}}
		return a
	}
	for _, tc := range []struct {
		name     string
		accounts []*quota.Account
		from     string
		want     string
	}{
		{"next never limited", []*quota.Account{acc("a", time.Hour, time.Minute), acc("b", 0, 0)}, "a", "b"},
		{"only the limited one", []*quota.Account{acc("a", time.Hour, time.Minute)}, "a", ""},
		{"all limited: wait", []*quota.Account{acc("a", time.Hour, time.Minute), acc("b", 2*time.Hour, time.Hour)}, "a", ""},
		{"window passed counts as open", []*quota.Account{acc("a", time.Hour, time.Minute), acc("b", -time.Minute, 5*time.Hour)}, "a", "b"},
		{"never limited before limited long ago", []*quota.Account{acc("a", time.Hour, time.Minute), acc("b", -time.Hour, 9*time.Hour), acc("c", 0, 0)}, "a", "c"},
		{"limited longest ago first", []*quota.Account{acc("a", time.Hour, time.Minute), acc("b", -time.Hour, 2*time.Hour), acc("c", -time.Hour, 9*time.Hour)}, "a", "c"},
		{"ties by name", []*quota.Account{acc("z", 0, 0), acc("y", 0, 0), acc("a", time.Hour, time.Minute)}, "a", "y"},
		{"never picks from", []*quota.Account{acc("a", 0, 0)}, "a", ""},
		{"least used first", []*quota.Account{acc("a", time.Hour, 0), usage(acc("b", 0, 0), 80, time.Hour), usage(acc("c", 0, 0), 20, time.Hour)}, "a", "c"},
		{"unknown usage counts as unused", []*quota.Account{acc("a", time.Hour, 0), usage(acc("b", 0, 0), 10, time.Hour), acc("c", 0, 0)}, "a", "c"},
		{"a reset window counts as unused", []*quota.Account{acc("a", time.Hour, 0), usage(acc("b", 0, 0), 99, -time.Minute), usage(acc("c", 0, 0), 20, time.Hour)}, "a", "b"},
		{"empty", nil, "a", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Pick(tc.accounts, tc.from, now); got != tc.want {
				t.Fatalf("Pick = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckCredential(t *testing.T) {
	for _, tc := range []struct {
		agent, cred, wantErr string
	}{
		{"claude", `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x","expiresAt":1}}`, ""},
		{"claude", `{"claudeAiOauth":{}}`, "accessToken"},
		{"claude", `not json`, "not a JSON object"},
		{"codex", `{"auth_mode":"apikey","OPENAI_API_KEY":"sk-x"}`, ""},
		{"codex", `{"tokens":{"access_token":"x"}}`, ""},
		{"codex", `{"auth_mode":"apikey"}`, "OPENAI_API_KEY"},
		// Token custody refuses a file with no access token (nothing to
		// run a turn with); the fleet refuses it before it is stored.
		{"codex", `{"tokens":{}}`, "OPENAI_API_KEY"},
		{"codex", `{"tokens":{"refresh_token":"r"}}`, "OPENAI_API_KEY"},
		{"gemini", `{}`, "claude and codex"},
	} {
		err := CheckCredential(tc.agent, []byte(tc.cred))
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("CheckCredential(%s, %s) = %v, want %q", tc.agent, tc.cred, err, tc.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "sk-") {
			t.Errorf("error shows the secret: %v", err)
		}
	}
}
