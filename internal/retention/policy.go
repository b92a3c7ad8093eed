// Package retention purges, for teams that ask for it (--retain), the
// sessions whose last activity is older than their creator's window. Nothing
// is ever purged by default: without a rule that covers a session's
// creator, the session stays until `cast rm --purge`. A purge goes through
// the same path as `cast rm --purge` (archive.PurgeIf): the etcd keys in
// one txn, then the session's segments in the object store.
package retention

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/authz"
)

// MinWindow is the shortest window a rule may give: retention is counted
// in days, and a shorter one is almost surely a typo that would purge
// the sessions of the day.
const MinWindow = 24 * time.Hour

// maxDays is the most days a window (a time.Duration) holds.
const maxDays = int64(math.MaxInt64 / (24 * time.Hour))

// Rule is one entry of --retain: sessions whose creator matches Principal
// are purged once idle for Window; Keep exempts them instead (a rule
// "forever" under a broader one).
type Rule struct {
	// Principal is "*" (every session), "ROLE:*" (every principal of a
	// role) or "ROLE:NAME", as a session's creator reads ("user:alice").
	Principal string
	Window    time.Duration
	Keep      bool
}

func (r Rule) String() string {
	if r.Keep {
		return r.Principal + "=forever"
	}
	if r.Window%(24*time.Hour) == 0 {
		return r.Principal + "=" + strconv.FormatInt(int64(r.Window/(24*time.Hour)), 10) + "d"
	}
	return r.Principal + "=" + r.Window.String()
}

// Policy is the rules of --retain; the most specific rule that matches a
// session's creator applies (ROLE:NAME, then ROLE:*, then *). A pflag
// Value: a bad --retain is refused when the flags are parsed.
type Policy struct {
	Rules []Rule
}

// ParsePolicy reads "PRINCIPAL=AGE[,PRINCIPAL=AGE...]": AGE is days
// ("90d"), a Go duration ("36h") or "forever".
func ParsePolicy(s string) (Policy, error) {
	var p Policy
	for entry := range strings.SplitSeq(s, ",") {
		r, err := parseRule(strings.TrimSpace(entry))
		if err != nil {
			return Policy{}, err
		}
		p.Rules = append(p.Rules, r)
	}
	return p, p.Validate()
}

func parseRule(entry string) (Rule, error) {
	who, age, ok := strings.Cut(entry, "=")
	if !ok || who == "" || age == "" {
		return Rule{}, fmt.Errorf("rule %q is not PRINCIPAL=AGE (as user:alice=90d, user:*=365d or *=forever)", entry)
	}
	r := Rule{Principal: strings.TrimSpace(who)}
	age = strings.TrimSpace(age)
	switch {
	case age == "forever":
		r.Keep = true
	case strings.HasSuffix(age, "d"):
		n, err := strconv.ParseInt(strings.TrimSuffix(age, "d"), 10, 32)
		if err != nil || n <= 0 {
			return Rule{}, fmt.Errorf("rule %q: age %q is not a whole number of days (90d), a duration (36h) or forever", entry, age)
		}
		// More days than a Duration holds would wrap around to some other
		// window, perhaps a day: a purge of what was meant to be kept.
		if n > maxDays {
			return Rule{}, fmt.Errorf("rule %q: age %q is more days than a window can hold (at most %dd); give forever to keep them", entry, age, maxDays)
		}
		r.Window = time.Duration(n) * 24 * time.Hour
	default:
		d, err := time.ParseDuration(age)
		if err != nil {
			return Rule{}, fmt.Errorf("rule %q: age %q is not a whole number of days (90d), a duration (36h) or forever", entry, age)
		}
		r.Window = d
	}
	return r, nil
}

// Validate checks each rule's principal and window, and that no principal
// has two rules.
func (p Policy) Validate() error {
	seen := map[string]bool{}
	for _, r := range p.Rules {
		if err := validPrincipal(r.Principal); err != nil {
			return err
		}
		if !r.Keep && r.Window < MinWindow {
			return fmt.Errorf("rule %s: a window under %v would purge the day's sessions; give days, as %s=90d", r, MinWindow, r.Principal)
		}
		if seen[r.Principal] {
			return fmt.Errorf("principal %s has two rules; give one", r.Principal)
		}
		seen[r.Principal] = true
	}
	return nil
}

func validPrincipal(who string) error {
	if who == "*" {
		return nil
	}
	role, name, ok := strings.Cut(who, ":")
	// A "*" within a name is no pattern: no creator has one, so the rule
	// would match nothing.
	if !ok || name == "" || !authz.Role(role).Valid() || strings.ContainsAny(name, ",= \t") || name != "*" && strings.Contains(name, "*") {
		return fmt.Errorf("principal %q is not *, ROLE:* or ROLE:NAME with ROLE admin, user or node (as a session's creator in `cast ls -o json`: user:alice; a NAME is whole, not a pattern)", who)
	}
	return nil
}

// Match returns the rule that applies to sessions created by creator
// ("user:alice"; "" for sessions from before creators were kept, which
// only * covers), and whether one does.
func (p Policy) Match(creator string) (Rule, bool) {
	role, _, _ := strings.Cut(creator, ":")
	for _, want := range []string{creator, role + ":*", "*"} {
		if want == "" || want == ":*" {
			continue
		}
		if i := slices.IndexFunc(p.Rules, func(r Rule) bool { return r.Principal == want }); i >= 0 {
			return p.Rules[i], true
		}
	}
	return Rule{}, false
}

// Enabled reports whether any rule purges.
func (p Policy) Enabled() bool {
	return slices.ContainsFunc(p.Rules, func(r Rule) bool { return !r.Keep })
}

// String is the policy as --retain takes it.
func (p Policy) String() string {
	out := make([]string, len(p.Rules))
	for i, r := range p.Rules {
		out[i] = r.String()
	}
	return strings.Join(out, ",")
}

// Set parses s as the whole policy (pflag.Value).
func (p *Policy) Set(s string) error {
	q, err := ParsePolicy(s)
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Type names the flag's value in --help (pflag.Value).
func (p *Policy) Type() string { return "rules" }
