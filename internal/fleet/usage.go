package fleet

import (
	"context"
	"fmt"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
)

// Usage windows come from the providers' own signals (Codex's x-codex-*
// headers, which codex records in its rollout and the node reports). They
// decide three things: how much room an account has (Pick), when a limit
// ends (the window's reset, not the cooldown), and switching ahead of a
// limit (design §7: at 95% of a short window, 97% of a weekly one).

// aheadAt is the used percentage at which the fleet switches before the
// provider refuses: 95% of a window up to a day long, 97% of longer ones.
func aheadAt(w store.UsageWindow) float64 {
	if w.WindowMinutes > 0 && w.WindowMinutes <= 24*60 {
		return 95
	}
	return 97
}

// used is the account's fullest window that has not reset yet (0 when no
// usage is known).
func used(a *store.AccountRecord, now time.Time) float64 {
	max := 0.0
	for _, w := range a.Usage {
		if (w.ResetsAt.IsZero() || w.ResetsAt.After(now)) && w.UsedPercent > max {
			max = w.UsedPercent
		}
	}
	return max
}

// resetOf is when the account's fullest unreset window reopens (zero when
// no window says): the end of a limit hit on that account.
func resetOf(a *store.AccountRecord, now time.Time) time.Time {
	var at time.Time
	best := -1.0
	for _, w := range a.Usage {
		if w.ResetsAt.After(now) && w.UsedPercent > best {
			at, best = w.ResetsAt, w.UsedPercent
		}
	}
	return at
}

func fromProto(ws []*castv1.UsageWindow) []store.UsageWindow {
	out := make([]store.UsageWindow, 0, len(ws))
	for _, w := range ws {
		u := store.UsageWindow{Name: w.Name, UsedPercent: w.UsedPercent, WindowMinutes: int(w.WindowMinutes)}
		if w.ResetsAt != nil {
			u.ResetsAt = w.ResetsAt.AsTime().UTC()
		}
		out = append(out, u)
	}
	return out
}

// OnUsage records the usage windows a turn on account saw. An account that
// switches on limits and is past a switch-ahead threshold is limited until
// that window resets, and the fleet moves to the account with most room
// before the provider starts refusing.
func (mg *Manager) OnUsage(ctx context.Context, sessionID, agent, account string, windows []*castv1.UsageWindow) error {
	if _, ok := credentialChecks[agent]; !ok || account == "" || len(windows) == 0 {
		return nil
	}
	now := mg.now().UTC()
	usage := fromProto(windows)
	var ahead *store.UsageWindow
	for i, w := range usage {
		if w.UsedPercent >= aheadAt(w) && (ahead == nil || w.UsedPercent > ahead.UsedPercent) {
			ahead = &usage[i]
		}
	}
	switchAhead := ahead != nil && mg.switches(agent)
	r, err := mg.st.UpdateAccount(ctx, agent, account, func(r *store.AccountRecord) {
		r.Usage, r.UsageAt = usage, now
		if switchAhead {
			until := ahead.ResetsAt
			if !until.After(now) {
				until = now.Add(mg.cfg.Cooldown)
			}
			if until.After(r.LimitedUntil) {
				r.LimitedUntil, r.LastLimited = until, now
			}
		}
	})
	if err != nil || !switchAhead {
		return err
	}
	why := fmt.Sprintf("at %.0f%% of its %s window", ahead.UsedPercent, windowName(*ahead))
	return mg.switchFrom(ctx, sessionID, agent, account, r.LimitedUntil, why)
}

func windowName(w store.UsageWindow) string {
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
