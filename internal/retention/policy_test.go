package retention_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/retention"
)

const day = 24 * time.Hour

func TestParsePolicy(t *testing.T) {
	p, err := retention.ParsePolicy("user:alice=90d, user:*=365d ,node:*=forever,*=800h")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.String(), "user:alice=90d,user:*=365d,node:*=forever,*=800h0m0s"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	for _, c := range []struct {
		creator string
		rule    string
		keep    bool
		window  time.Duration
	}{
		{"user:alice", "user:alice", false, 90 * day},
		{"user:bob", "user:*", false, 365 * day},
		{"node:laptop", "node:*", true, 0},
		{"admin:admin", "*", false, 800 * time.Hour},
		{"", "*", false, 800 * time.Hour}, // a session from before creators
	} {
		r, ok := p.Match(c.creator)
		if !ok || r.Principal != c.rule || r.Keep != c.keep || r.Window != c.window {
			t.Errorf("Match(%q) = %+v, %v; want rule %s keep %v window %v", c.creator, r, ok, c.rule, c.keep, c.window)
		}
	}
	narrow, err := retention.ParsePolicy("user:alice=90d")
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"user:bob", "admin:alice", "node:alice", ""} {
		if r, ok := narrow.Match(who); ok {
			t.Errorf("Match(%q) = %+v under user:alice=90d; want no rule", who, r)
		}
	}
}

// A bad --retain is refused when the flag is parsed (Set), saying what
// is wrong and what a good one looks like.
func TestBadRetainRefused(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "is not PRINCIPAL=AGE"},
		{"alice=90d", `principal "alice" is not *, ROLE:* or ROLE:NAME`},
		{"boss:alice=90d", `principal "boss:alice"`},
		{"user:=90d", `principal "user:"`},
		// A glob within a name matched no creator (names hold no "*"):
		// the rule was taken and purged nothing, without a word.
		{"user:bob*=30d", `principal "user:bob*" is not *, ROLE:* or ROLE:NAME`},
		{"node:*laptop=30d", `principal "node:*laptop"`},
		{"user:alice", "is not PRINCIPAL=AGE"},
		{"user:alice=90", `age "90" is not a whole number of days`},
		{"user:alice=-3d", `age "-3d"`},
		{"user:alice=ninety days", `age "ninety days"`},
		{"user:alice=1h", "a window under 24h0m0s would purge the day's sessions"},
		{"*=0d", `age "0d"`},
		// Days past what a duration holds wrapped around: 213505d (585
		// years, meant as "keep them") became a window of 24.4 hours.
		{"user:*=213505d", `age "213505d" is more days than a window can hold (at most 106751d)`},
		{"user:*=2147483647d", `age "2147483647d" is more days`},
		{"user:alice=90d,user:alice=30d", "principal user:alice has two rules"},
		{"user:alice=90d,,*=365d", "is not PRINCIPAL=AGE"},
	} {
		var p retention.Policy
		err := p.Set(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Set(%q) = %v; want an error with %q", c.in, err, c.want)
		}
		if len(p.Rules) != 0 {
			t.Errorf("Set(%q) kept rules %v after refusing", c.in, p.Rules)
		}
	}
	cfg := retention.DefaultConfig()
	cfg.Policy = retention.Policy{Rules: []retention.Rule{{Principal: "user:alice", Window: time.Minute}}}
	if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "--retain: ") {
		t.Errorf("Validate of a one-minute window = %v; want a --retain error", err)
	}
	cfg = retention.DefaultConfig()
	cfg.Every = 0
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--retain-every") {
		t.Errorf("Validate of --retain-every 0 = %v", err)
	}
	if err := retention.DefaultConfig().Validate(); err != nil || retention.DefaultConfig().Policy.Enabled() {
		t.Errorf("the default config = %v, enabled %v; want valid and purging nothing", err, retention.DefaultConfig().Policy.Enabled())
	}
}
