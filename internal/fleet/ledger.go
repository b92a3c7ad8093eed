package fleet

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/quota"
)

// The reservation ledger: every running fleet turn reserves a share of
// its account (TurnReserve percent of each window, until the turn ends).
// An account's projected use is its reported use plus its reservations.
// A turn that starts on an account whose projected use reaches the
// switch-ahead threshold (95% of a 5-hour window, 97% of a weekly one)
// moves the fleet to the account with the lowest projected use, so
// parallel turns spread over the accounts with headroom instead of all
// running the freshest one into its limit together. Unlike a switch at a
// real limit, the loaded account is not marked limited: once its turns end
// it ranks by its reported use again.

// load is the projected extra use per account from the running turns.
func (mg *Manager) load(ctx context.Context, agent string) (map[string]float64, map[string]int, error) {
	res, err := mg.st.Reservations(ctx, agent)
	if err != nil {
		return nil, nil, err
	}
	load := make(map[string]float64, len(res))
	for name, n := range res {
		load[name] = float64(n) * mg.cfg.TurnReserve
	}
	return load, res, nil
}

// crowded is the window of r that its running turns push to the
// switch-ahead threshold (nil when none).
func crowded(r *quota.Account, extra float64, mg *Manager) *quota.Window {
	now := mg.now()
	var hit *quota.Window
	for i, w := range r.Usage {
		if w.Open(now) && w.UsedPercent+extra >= w.AheadAt() && (hit == nil || w.UsedPercent > hit.UsedPercent) {
			hit = &r.Usage[i]
		}
	}
	return hit
}

// OnStart reserves for a fleet turn starting on account and, under auto,
// moves the fleet ahead when the account's running turns crowd it.
func (mg *Manager) OnStart(ctx context.Context, sessionID, agent, account string) error {
	if _, ok := fleetLogin(agent); !ok || account == "" {
		return nil
	}
	if err := mg.st.Reserve(ctx, agent, account, sessionID); err != nil {
		return err
	}
	r, err := mg.st.GetAccount(ctx, agent, account)
	if err != nil || mg.policy(r) != PolicyAuto {
		return err
	}
	load, res, err := mg.load(ctx, agent)
	if err != nil {
		return err
	}
	w := crowded(r, load[account], mg)
	if w == nil {
		return nil
	}
	accounts, err := mg.st.ListAccounts(ctx, agent)
	if err != nil {
		return err
	}
	next := PickLoaded(accounts, account, mg.now(), load)
	for _, a := range accounts {
		if a.Name == next && crowded(a, load[next], mg) != nil {
			next = "" // every other account is as crowded: stay
		}
	}
	if next == "" {
		return nil
	}
	why := fmt.Sprintf("at %.0f%% of its %s window with %d turns running", w.UsedPercent, w.Label(), res[account])
	mg.lg.Info("fleet account crowded by running turns", zap.String("agent", agent), zap.String("account", account), zap.Int("running", res[account]))
	return mg.switchTo(ctx, sessionID, agent, account, "crowded", w.ResetsAt, why)
}

// OnEnd frees a fleet turn's reservation.
func (mg *Manager) OnEnd(ctx context.Context, sessionID, agent string) error {
	if _, ok := fleetLogin(agent); !ok {
		return nil
	}
	return mg.st.Release(ctx, agent, sessionID)
}
