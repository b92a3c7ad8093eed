package fleet

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/tick"
)

// OnParked handles a turn that parked on a usage limit while the agent's
// shared store held account: the account is marked limited (until its
// fullest window resets, as the provider last reported it, else for the
// cooldown) and, if it is still the active one, the fleet switches to the
// account with the most headroom and the session gets an account_switch
// notice. Several sessions reporting the same limit switch once (Activate
// compares the active record). With no account left, the fleet waits for
// the earliest reset.
func (mg *Manager) OnParked(ctx context.Context, sessionID, agent, account string) error {
	if _, ok := fleetLogin(agent); !ok || account == "" {
		return nil
	}
	// From the limit's record to the switch, the sweep keeps off this
	// account: between the two it would switch without the notice.
	defer mg.park(agent, account)()
	now := mg.now().UTC()
	// A limit counts once, by the report that finds the account open, or
	// limited only ahead of it (a switch ahead is no limit hit): a resent
	// report (the node's first send timed out) or another session's report
	// of the same limit finds it hit already.
	fresh := false
	r, err := mg.st.UpdateAccount(ctx, agent, account, func(r *quota.Account) {
		fresh = !r.Limited(now) || !r.LimitHit
		r.LimitHit = true
		until := r.ResetOf(now)
		if until.IsZero() {
			until = now.Add(mg.cfg.Cooldown)
		}
		r.LimitedUntil, r.LastLimited = until, now
	})
	if err != nil {
		return err
	}
	if fresh {
		mg.m.Limited.WithLabelValues(agent).Inc()
	}
	switch mg.policy(r) {
	case PolicyAuto:
		return mg.switchFrom(ctx, sessionID, agent, account, r.LimitedUntil, "at its usage limit")
	case PolicyAsk:
		return mg.ask(ctx, sessionID, agent, account, r.LimitedUntil)
	}
	return nil // resume: the sweep re-activates it when its window reopens; off: a person does
}

// switchFrom moves the agent's fleet off account (limited until until) if
// it is still the active one, and draws the notice in sessionID.
func (mg *Manager) switchFrom(ctx context.Context, sessionID, agent, account string, until time.Time, why string) error {
	return mg.switchTo(ctx, sessionID, agent, account, "limit", until, why)
}

// switchTo is switchFrom counted under reason; the account it picks has
// the most headroom counting the turns running on each (the ledger).
func (mg *Manager) switchTo(ctx context.Context, sessionID, agent, account, reason string, until time.Time, why string) error {
	now := mg.now().UTC()
	for range 10 {
		act, err := mg.st.ActiveAccount(ctx, agent)
		if err != nil {
			return err
		}
		if act.Name != account {
			// Another report switched already (or it was never active);
			// or this is the resend of the report whose switch committed
			// without its notice written: write it now. It is kept with
			// the notices the fleet owes, which outlive the active record
			// (another activation may have replaced it meanwhile); the
			// record's own is written too (one an older version kept only
			// there).
			if err := mg.writeOwed(ctx, sessionID, agent, act.SwitchNotice); err != nil {
				return err
			}
			return mg.writeChoiceOwed(ctx, agent, sessionID)
		}
		accounts, err := mg.st.ListAccounts(ctx, agent)
		if err != nil {
			return err
		}
		load, _, err := mg.load(ctx, agent)
		if err != nil {
			return err
		}
		next := PickLoaded(accounts, account, now, load)
		if next == "" {
			mg.lg.Info("every fleet account is limited; waiting for a reset", zap.String("agent", agent))
			return nil
		}
		n := notice(agent, account, next, why, until)
		owed := quota.SwitchNotice{Session: sessionID, ClientID: n.ClientId, Text: n.Text}
		ok, err := mg.activate(ctx, agent, next, act, reason, owed)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		// Committed: the session must hear of it even if the report's
		// call has gone (the node's deadline passed), as the nodes do: the
		// node's resend finds the fleet moved and draws nothing.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), broadcastTimeout)
		defer cancel()
		if _, err := mg.st.UpdateAccount(cctx, agent, account, func(r *quota.Account) { r.Switches++ }); err != nil {
			mg.lg.Warn("count switch failed", zap.Error(err))
		}
		return mg.writeChoiceOwed(cctx, agent, sessionID) // owed among them
	}
	return nil
}

// writeOwed appends the notice the active record owes sessionID, if it
// owes it one. Under the recorded client id a second write is the store's
// retry of the first, kept once.
func (mg *Manager) writeOwed(ctx context.Context, sessionID, agent string, owed quota.SwitchNotice) error {
	if owed.ClientID == "" || owed.Session != sessionID {
		return nil
	}
	_, err := mg.st.Append(ctx, sessionID, []*castv1.Message{switchNotice(agent, owed)}, fence.Guard{})
	return err
}

// Run sweeps until ctx ends: an active account whose limit passed is
// activated again (the window reset: nodes rewrite the store and run their
// parked turns), and a limited active account gives way to one with room.
func (mg *Manager) Run(ctx context.Context) {
	tick.Every(ctx, mg.cfg.Sweep, func() bool {
		if err := mg.Sweep(ctx); err != nil && ctx.Err() == nil {
			mg.lg.Warn("fleet sweep failed", zap.Error(err))
		}
		return true
	})
}

// Sweep checks every agent's active account once (Run calls it).
func (mg *Manager) Sweep(ctx context.Context) error {
	var errs []error
	for _, agent := range Agents() {
		errs = append(errs, mg.sweep(ctx, agent))
	}
	return errors.Join(errs...)
}

func (mg *Manager) sweep(ctx context.Context, agent string) error {
	if err := mg.count(ctx, agent); err != nil {
		return err
	}
	_ = mg.writeChoiceOwed(ctx, agent, "") // those that failed to write; logged
	act, err := mg.st.ActiveAccount(ctx, agent)
	if err != nil || act.Name == "" {
		return err
	}
	r, err := mg.st.GetAccount(ctx, agent, act.Name)
	if err != nil || r.LimitedUntil.IsZero() {
		return err
	}
	now := mg.now().UTC()
	policy := mg.policy(r)
	if !r.Limited(now) {
		if policy == PolicyOff {
			return nil // a person resumes (`cast account use`)
		}
		if _, err := mg.st.UpdateAccount(ctx, agent, act.Name, func(r *quota.Account) { r.LimitedUntil = time.Time{} }); err != nil {
			return err
		}
		ok, err := mg.activate(ctx, agent, act.Name, act, "reset", quota.SwitchNotice{})
		if ok {
			// A choice still pending is moot: the window reopened.
			mg.dropChoice(ctx, agent, act.Name, "its window reset")
		}
		return err
	}
	if policy != PolicyAuto || mg.parked(agent, act.Name) {
		return nil // a parked report is switching it (with its notice)
	}
	accounts, err := mg.st.ListAccounts(ctx, agent)
	if err != nil {
		return err
	}
	if next := Pick(accounts, act.Name, now); next != "" {
		_, err := mg.activate(ctx, agent, next, act, "limit", quota.SwitchNotice{})
		return err
	}
	return nil
}

// count sets the accounts gauge from the store (every replica reports the
// same numbers; alerts take the max).
func (mg *Manager) count(ctx context.Context, agent string) error {
	accounts, err := mg.st.ListAccounts(ctx, agent)
	if err != nil {
		return err
	}
	now, open, lim := mg.now(), 0, 0
	for _, a := range accounts {
		if a.Limited(now) {
			lim++
		} else {
			open++
		}
	}
	mg.m.Accounts.WithLabelValues(agent, "open").Set(float64(open))
	mg.m.Accounts.WithLabelValues(agent, "limited").Set(float64(lim))
	act, err := mg.st.ActiveAccount(ctx, agent)
	if err != nil {
		return err
	}
	mg.gauges(agent, accounts, act.Name, now)
	return nil
}

// park counts an OnParked call on agent's account until the returned func
// is called. The sweep's switch, its retry, is for a report that failed or
// died between the two steps, not for one under way on this replica.
func (mg *Manager) park(agent, account string) (done func()) {
	k := agent + "/" + account
	mg.parkingMu.Lock()
	mg.parking[k]++
	mg.parkingMu.Unlock()
	return func() {
		mg.parkingMu.Lock()
		defer mg.parkingMu.Unlock()
		if mg.parking[k]--; mg.parking[k] == 0 {
			delete(mg.parking, k)
		}
	}
}

// parked says whether an OnParked call on agent's account is under way.
func (mg *Manager) parked(agent, account string) bool {
	mg.parkingMu.Lock()
	defer mg.parkingMu.Unlock()
	return mg.parking[agent+"/"+account] > 0
}
