package runner_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/runner"
)

// The real codex turns the provider's x-codex-* usage headers into its
// rollout; the runner hands them back as the turn's usage windows.
func TestCodexUsageWindows(t *testing.T) {
	t.Parallel()
	if cases[1].agent != "codex" {
		t.Fatal("cases[1] is not codex")
	}
	fake := fakemodel.Start(t)
	reset := time.Now().Add(42 * time.Minute).Truncate(time.Second).UTC()
	fake.SetHeader("x-codex-primary-used-percent", "96.5")
	fake.SetHeader("x-codex-primary-window-minutes", "300")
	fake.SetHeader("x-codex-primary-reset-at", fmt.Sprint(reset.Unix()))
	fake.SetHeader("x-codex-secondary-used-percent", "12")
	fake.SetHeader("x-codex-secondary-window-minutes", "10080")
	r, turn := setup(t, cases[1], fake.URL)
	turn.ReportUsage = true
	turn.Prompt = "hello MARK-U1"
	res, _, _, err := run(t, r, turn)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%+v", res.Usage)
	if len(res.Usage) != 2 || res.Usage[0].Name != "primary" || res.Usage[0].UsedPercent != 96.5 || res.Usage[0].WindowMinutes != 300 ||
		!res.Usage[0].ResetsAt.Equal(reset) || res.Usage[1].Name != "secondary" || res.Usage[1].UsedPercent != 12 || !res.Usage[1].ResetsAt.IsZero() {
		t.Fatalf("usage %s", got)
	}

	// Without the headers there is nothing to report.
	fake2 := fakemodel.Start(t)
	r2, turn2 := setup(t, cases[1], fake2.URL)
	turn2.ReportUsage = true
	turn2.Prompt = "hello MARK-U2"
	res2, _, _, err := run(t, r2, turn2)
	if err != nil || len(res2.Usage) != 0 {
		t.Fatalf("usage without headers: %+v %v", res2.Usage, err)
	}
}

// The real claude, on an OAuth credential, reports the provider's
// anthropic-ratelimit-unified-* headers as rate_limit_event in stream-json;
// with ReportUsage the runner returns them, and a subscription limit ("You've
// hit your session limit") is classified as a rate limit with its reset.
func TestClaudeUsageWindows(t *testing.T) {
	if cases[0].agent != "claude" {
		t.Fatal("cases[0] is not claude")
	}
	fake := fakemodel.Start(t)
	reset := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	for k, v := range map[string]string{
		"status": "allowed_warning", "5h-utilization": "0.96", "5h-reset": fmt.Sprint(reset.Unix()),
		"5h-surpassed-threshold": "0.9", "representative-claim": "five_hour", "reset": fmt.Sprint(reset.Unix()),
	} {
		fake.SetHeader("anthropic-ratelimit-unified-"+k, v)
	}
	r, turn := setup(t, cases[0], fake.URL)
	var env []string
	for _, kv := range turn.Env {
		if !strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") {
			env = append(env, kv)
		}
	}
	turn.Env = append(env, "CLAUDE_CODE_MAX_RETRIES=0")
	dir := filepath.Join(turn.Home, ".claude")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cred := fmt.Sprintf(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-USAGE","refreshToken":"r","expiresAt":%d,"scopes":["user:inference"]}}`, time.Now().Add(24*time.Hour).UnixMilli())
	if err := os.WriteFile(filepath.Join(dir, ".credentials.json"), []byte(cred), 0o600); err != nil {
		t.Fatal(err)
	}
	turn.ReportUsage = true
	turn.Prompt = "hello MARK-CU1"
	res, got, _, err := run(t, r, turn)
	if err != nil || len(got) == 0 {
		t.Fatalf("turn: %v, %d messages", err, len(got))
	}
	if len(res.Usage) != 1 || res.Usage[0].Name != "five_hour" || res.Usage[0].UsedPercent != 96 || res.Usage[0].WindowMinutes != 300 || !res.Usage[0].ResetsAt.Equal(reset) {
		t.Fatalf("usage %+v", res.Usage)
	}

	fake.RejectCredential("sk-ant-oat01-USAGE", 429)
	turn.NativeID, turn.NativePath = res.NativeID, res.NativePath
	turn.Prompt = "again MARK-CU2"
	res, _, _, err = run(t, r, turn)
	if res.Reason != runner.ReasonRateLimited || !strings.Contains(err.Error(), "hit your session limit") {
		t.Fatalf("limit: reason %q, err %v", res.Reason, err)
	}
	if len(res.Usage) != 1 || !res.Usage[0].ResetsAt.Equal(reset) {
		t.Fatalf("usage at the limit %+v", res.Usage)
	}
}
