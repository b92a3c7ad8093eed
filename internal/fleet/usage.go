package fleet

import (
	"context"
	"fmt"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/wire"
)

// Usage windows come from the providers' own signals (Codex's x-codex-*
// headers, which codex records in its rollout and the node reports). They
// decide three things: how much room an account has (Pick), when a limit
// ends (the window's reset, not the cooldown), and switching ahead of a
// limit (design §7: at 95% of a short window, 97% of a weekly one).

// OnUsage records the usage windows a turn on account saw. An account that
// switches on limits and is past a switch-ahead threshold is limited until
// every window past one resets, and the fleet moves to the account with most room
// before the provider starts refusing.
func (mg *Manager) OnUsage(ctx context.Context, sessionID, agent, account string, windows []*castv1.UsageWindow) error {
	if _, ok := fleetLogin(agent); !ok || account == "" || len(windows) == 0 {
		return nil
	}
	now := mg.now().UTC()
	usage := wire.WindowsFromProto(windows)
	// ahead is the fullest window past its threshold (the notice names
	// it); until is when the last of them reopens, the limit's end.
	var ahead *quota.Window
	var until time.Time
	for i, w := range usage {
		// A window that has reset since (an earlier turn's figure, which a
		// turn that got no answer reports) has room again.
		if !w.Open(now) || w.UsedPercent < w.AheadAt() {
			continue
		}
		if ahead == nil || w.UsedPercent > ahead.UsedPercent {
			ahead = &usage[i]
		}
		end := w.ResetsAt
		if end.IsZero() {
			end = now.Add(mg.cfg.Cooldown)
		}
		if end.After(until) {
			until = end
		}
	}
	if ahead != nil {
		// As in OnParked: from the limit's record to the switch, the sweep
		// keeps off this account, or it would switch without the notice.
		defer mg.park(agent, account)()
	}
	switchAhead := false
	r, err := mg.st.UpdateAccount(ctx, agent, account, func(r *quota.Account) {
		r.Usage, r.UsageAt = usage, now
		// Only auto switches ahead; ask asks at the limit itself.
		switchAhead = ahead != nil && mg.policy(r) == PolicyAuto
		if switchAhead {
			if !r.Limited(now) {
				r.LimitHit = false // a new limit, ahead of the provider's: none hit yet
			}
			if until.After(r.LimitedUntil) {
				r.LimitedUntil, r.LastLimited = until, now
			}
		}
	})
	if err != nil || !switchAhead {
		return err
	}
	why := fmt.Sprintf("at %.0f%% of its %s window", ahead.UsedPercent, ahead.Label())
	return mg.switchFrom(ctx, sessionID, agent, account, r.LimitedUntil, why)
}
