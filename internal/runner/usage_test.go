package runner_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
)

// The real codex turns the provider's x-codex-* usage headers into its
// rollout; the runner hands them back as the turn's usage windows.
func TestCodexUsageWindows(t *testing.T) {
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
	turn2.Prompt = "hello MARK-U2"
	res2, _, _, err := run(t, r2, turn2)
	if err != nil || len(res2.Usage) != 0 {
		t.Fatalf("usage without headers: %+v %v", res2.Usage, err)
	}
}
