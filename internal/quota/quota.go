// Package quota holds fleet accounts' plain types: an account as stored,
// the provider usage windows its turns reported, its limit, and the active
// account. It is a leaf: the runner (which reads the windows), the store
// (which keeps them in etcd), the wire (which converts them) and the fleet
// manager (which decides on them) all share these types, so none needs
// another's.
package quota

import (
	"fmt"
	"time"
)

// Window is one of a provider's usage windows as a turn last saw it: how
// much of it is used and when it resets.
type Window struct {
	// Name is the provider's: "primary" (Codex's 5-hour window),
	// "secondary" (weekly); Claude's "five_hour", "seven_day",
	// "seven_day_opus", "seven_day_sonnet".
	Name          string    `json:"name"`
	UsedPercent   float64   `json:"used_percent"`
	WindowMinutes int       `json:"window_minutes,omitempty"`
	ResetsAt      time.Time `json:"resets_at,omitzero"` // zero when the provider did not say
	// Model is set on a per-model window (Claude's weekly "opus").
	Model string `json:"model,omitempty"`
}

// AheadAt is the used percentage at which the fleet switches before the
// provider refuses (design §7): 95% of a window up to a day long, 97% of
// longer ones.
func (w Window) AheadAt() float64 {
	if w.WindowMinutes > 0 && w.WindowMinutes <= 24*60 {
		return 95
	}
	return 97
}

// Open says whether the window has not reset yet at now (a window with no
// reset time counts as open).
func (w Window) Open(now time.Time) bool { return w.ResetsAt.IsZero() || w.ResetsAt.After(now) }

// StaleAfter is the age past which usage figures are shown as stale: they
// come only with turns, so an idle account's figure ages.
const StaleAfter = 30 * time.Minute

// Window kinds: a short (session) window, a weekly one, a per-model weekly one.
const (
	KindSession   = "session"
	KindWeek      = "week"
	KindModelWeek = "model_week"
)

// Kind is the window's kind: a window up to a day long is a session
// window, a longer one a week (per model when it names one).
func (w Window) Kind() string {
	switch {
	case w.WindowMinutes > 0 && w.WindowMinutes <= 24*60:
		return KindSession
	case w.Model != "":
		return KindModelWeek
	}
	return KindWeek
}

// Title names the window for a table: "5-hour session", "7-day week",
// "7-day week (opus)".
func (w Window) Title() string {
	t := w.Label() + " " + map[string]string{KindSession: "session", KindWeek: "week", KindModelWeek: "week"}[w.Kind()]
	if w.WindowMinutes <= 0 {
		t = w.Name
	}
	if w.Model != "" {
		t += " (" + w.Model + ")"
	}
	return t
}

// UsedAt is the window's used percentage at now: what the provider last
// reported, or 0 once the window has reset since.
func (w Window) UsedAt(now time.Time) float64 {
	if !w.Open(now) {
		return 0
	}
	return w.UsedPercent
}

// Label names the window's length for people: "5-hour", "7-day", else its name.
func (w Window) Label() string {
	switch {
	case w.WindowMinutes <= 0:
		return w.Name
	case w.WindowMinutes%(24*60) == 0:
		return fmt.Sprintf("%d-day", w.WindowMinutes/(24*60))
	case w.WindowMinutes%60 == 0:
		return fmt.Sprintf("%d-hour", w.WindowMinutes/60)
	}
	return fmt.Sprintf("%d-minute", w.WindowMinutes)
}

// Account is a fleet account as stored: the credential sealed by the
// caller (never plaintext), its limit bookkeeping and its last usage.
type Account struct {
	Name         string    `json:"name"`
	Agent        string    `json:"agent"`
	Sealed       []byte    `json:"sealed"` // secrets.Box output, bound to agent/name
	LimitedUntil time.Time `json:"limited_until,omitzero"`
	// LimitHit says a turn parked on the limit LimitedUntil holds (and it
	// was counted); false while the fleet only switched ahead of one.
	LimitHit bool `json:"limit_hit,omitempty"`
	// LastLimited orders the accounts with headroom: the one limited
	// longest ago (or never) goes first.
	LastLimited time.Time `json:"last_limited,omitzero"`
	Switches    int64     `json:"switches,omitempty"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Usage is the provider's usage windows as the last turn on this
	// account reported them (UsageAt).
	Usage   []Window  `json:"usage,omitempty"`
	UsageAt time.Time `json:"usage_at,omitzero"`
	// Policy is what a usage limit on this account does (ask, auto,
	// resume, off); empty follows the fleet's.
	Policy string `json:"policy,omitempty"`
	Rev    int64  `json:"-"` // the store's revision, for compare-and-swap
}

// Limited says whether the account is over a limit at now.
func (a *Account) Limited(now time.Time) bool {
	return !a.LimitedUntil.IsZero() && a.LimitedUntil.After(now)
}

// Used is the account's fullest window that has not reset yet (0 when no
// usage is known).
func (a *Account) Used(now time.Time) float64 {
	max := 0.0
	for _, w := range a.Usage {
		if w.Open(now) && w.UsedPercent > max {
			max = w.UsedPercent
		}
	}
	return max
}

// ResetOf is when the account's fullest unreset window reopens (zero when
// no window says): the end of a limit hit on that account. Every used-up
// window holds the limit, so of several the one that reopens last ends it.
func (a *Account) ResetOf(now time.Time) time.Time {
	var at time.Time
	best := -1.0
	for _, w := range a.Usage {
		used := min(w.UsedPercent, 100)
		if w.ResetsAt.After(now) && (used > best || used == best && w.ResetsAt.After(at)) {
			at, best = w.ResetsAt, used
		}
	}
	return at
}

// Active is the account an agent's shared credential store holds. Epoch
// grows with every activation (a re-activation at a window reset
// included), so nodes can ignore an older instruction.
type Active struct {
	Name  string `json:"name"`
	Epoch int64  `json:"epoch"`
	Rev   int64  `json:"-"`
	// SwitchNotice is the notice the activation owes the session whose
	// limit report made it, written with it in one transaction (and with
	// the Choice's Owed, which the next activation does not replace): a
	// resend of that report (the first answer lost, or its replica gone
	// before the notice was appended) finds the fleet moved and still
	// writes it, and so does the sweep.
	SwitchNotice
}

// SwitchNotice is an account_switch notice owed to Session, whole: a
// rewrite under the same ClientID is one the store's exactly-once append
// keeps once (a different body would be refused as a reused id).
type SwitchNotice struct {
	Session  string `json:"notice_session,omitempty"`
	ClientID string `json:"notice_client_id,omitempty"`
	Text     string `json:"notice_text,omitempty"`
	// Type is the notice's type ("": account_switch); an answered choice
	// owes account_choice notices too.
	Type string `json:"notice_type,omitempty"`
}

// Choice is a pending choice under the ask policy: From hit its limit, and
// Sessions are parked until a person approves a switch, denies it (wait
// for the reset) or picks an account. One per agent: the whole fleet runs
// on one account.
type Choice struct {
	From     string    `json:"from"`
	Until    time.Time `json:"until"` // when From's limit ends
	Sessions []string  `json:"sessions"`
	Since    time.Time `json:"since"`
	// Owed are the notices the fleet owes sessions: an answer's to the
	// sessions it held (recorded in the write that resolved it, From ""
	// then), a question's, a switch's; each is kept until it is written
	// (a rewrite under its client id is kept once by the store).
	Owed []SwitchNotice `json:"owed,omitempty"`
	Rev  int64          `json:"-"`
}
