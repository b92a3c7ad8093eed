package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// `cast usage` from a ListAccounts answer: a fresh figure shows its age and
// time to reset; a stale one says so; a window that reset since the figure
// shows 0% now; the policy line names the best account; an account with
// its own policy gets its own line.
func TestUsageReport(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(d)) }
	resp := &castv1.ListAccountsResponse{
		Accounts: []*castv1.Account{
			{Name: "fresh", Agent: "claude", Active: true, Policy: "auto", UsageTime: ts(-2 * time.Minute), Usage: []*castv1.UsageWindow{
				{Name: "five_hour", UsedPercent: 96.4, WindowMinutes: 300, ResetTime: ts(4*time.Hour + 5*time.Minute)},
				{Name: "seven_day", UsedPercent: 40, WindowMinutes: 7 * 24 * 60, ResetTime: ts(50 * time.Hour)},
				{Name: "seven_day_opus", UsedPercent: 12, WindowMinutes: 7 * 24 * 60, Model: "opus"},
			}},
			{Name: "stale", Agent: "claude", Policy: "ask", UsageTime: ts(-6 * time.Hour), Usage: []*castv1.UsageWindow{
				{Name: "five_hour", UsedPercent: 25, WindowMinutes: 300, ResetTime: ts(-time.Hour)},
			}},
			{Name: "new", Agent: "claude", Policy: "auto"},
		},
		Fleet: []*castv1.FleetPolicy{{Agent: "claude", Policy: "auto", Active: "fresh", Best: "stale", BestUsedPercent: 0}},
	}
	rep := newUsageReport(resp, now)
	var out bytes.Buffer
	if err := rep.print(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"claude (policy auto)",
		"fresh (active)", "5-hour session", "96%", "resets in 4h 5m", "2m ago",
		"7-day week ", "resets in 2d 2h", "7-day week (opus)",
		"6h 0m ago (stale)", "reset since (was 25%)",
		"new ", "no usage reported yet",
		"On a limit: auto-switch hops to the account with the most headroom (best: stale at 0%) and continues parked sessions",
		"stale (policy ask): the session parks and asks: `cast account approve --agent claude`",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "2m ago (stale)") {
		t.Errorf("a fresh figure shown stale:\n%s", text)
	}

	// --json: stable names, the same figures.
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Fleets []struct {
			Agent      string
			PolicyLine string `json:"policy_line"`
			Accounts   []struct {
				Name       string
				Stale      bool
				AgeSeconds *int64 `json:"age_seconds"`
				Windows    []struct {
					Name, Kind      string
					UsedPercent     float64 `json:"used_percent"`
					ResetsInSeconds *int64  `json:"resets_in_seconds"`
					Reset           bool
				}
			}
		}
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	f := v.Fleets[0]
	fresh, stale, fresh0 := f.Accounts[0], f.Accounts[1], f.Accounts[0].Windows[0]
	switch {
	case fresh.Stale || *fresh.AgeSeconds != 120 || fresh0.Kind != "session" || fresh0.UsedPercent != 96.4 || *fresh0.ResetsInSeconds != 4*3600+300:
		t.Errorf("fresh account: %+v %+v", fresh, fresh0)
	case fresh.Windows[2].Kind != "model_week" || fresh.Windows[1].Kind != "week":
		t.Errorf("window kinds: %+v", fresh.Windows)
	case !stale.Stale || *stale.AgeSeconds != 6*3600 || !stale.Windows[0].Reset || stale.Windows[0].UsedPercent != 0:
		t.Errorf("stale account: %+v", stale)
	case f.Accounts[2].AgeSeconds != nil || !strings.Contains(f.PolicyLine, "best: stale at 0%"):
		t.Errorf("fleet: %+v", f)
	}
}

func TestSpan(t *testing.T) {
	for d, want := range map[time.Duration]string{
		40 * time.Second: "40s", 12 * time.Minute: "12m", 4*time.Hour + 5*time.Minute: "4h 5m", 74 * time.Hour: "3d 2h",
	} {
		if got := span(d); got != want {
			t.Errorf("span(%v) = %q, want %q", d, got, want)
		}
	}
}
