package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/transcript"
)

// The ask policy: a limit parks the session and asks. The choice pending
// for the agent's fleet lists the parked sessions; a person answers with
// `cast account approve` (switch to the account with the most headroom),
// `cast account deny` (wait for the reset) or `cast account use NAME`.
// Whatever the answer, the parked turns run when the fleet's account is
// next activated (the switch, or the re-activation at the reset).

// ask records sessionID in the agent's pending choice and draws the
// question in the session (once per session and choice). Nothing is asked
// when account is no longer active: a switch happened meanwhile and the
// node runs the turn again on the new account. The question is recorded
// as owed in the write that lists the session: one whose append fails is
// written again by the node's resend of the report, or by the sweep.
func (mg *Manager) ask(ctx context.Context, sessionID, agent, account string, until time.Time) error {
	act, err := mg.st.ActiveAccount(ctx, agent)
	if err != nil || act.Name != account {
		return err
	}
	accounts, err := mg.st.ListAccounts(ctx, agent)
	if err != nil {
		return err
	}
	hop := "no other account has headroom now"
	if best := Pick(accounts, account, mg.now()); best != "" {
		hop = "switches to " + best + ", the account with the most headroom"
	}
	text := fmt.Sprintf("Account %s is at its usage limit (it resets at %s). This session waits for a choice: "+
		"`cast account approve --agent %s` %s; `cast account use NAME --agent %s` picks an account; "+
		"`cast account deny --agent %s` waits for the reset.", account, until.UTC().Format(time.RFC3339), agent, hop, agent, agent)
	question := quota.SwitchNotice{Session: sessionID, ClientID: ids.NewClientID(), Text: text, Type: transcript.NoticeAccountChoice}
	c, added, err := mg.st.AddChoice(ctx, agent, account, until, sessionID, mg.now().UTC(), question)
	if err != nil {
		return err
	}
	if !added && !slices.ContainsFunc(c.Owed, func(n quota.SwitchNotice) bool { return n.Session == sessionID }) {
		return nil // asked already
	}
	return mg.writeChoiceOwed(ctx, agent, sessionID)
}

// Answer answers agent's pending choice: approve switches the fleet to
// the account with the most headroom; deny keeps the limited account and
// its sessions wait for its reset (the sweep re-activates it then). It
// returns the active account and the sessions the choice held.
func (mg *Manager) Answer(ctx context.Context, agent string, approve bool) (string, []string, error) {
	if _, ok := fleetLogin(agent); !ok {
		return "", nil, notFleet(agent)
	}
	for range 10 {
		c, err := mg.st.Choice(ctx, agent)
		if err != nil {
			return "", nil, err
		}
		if c.From == "" {
			return "", nil, errs.New(errs.KindFailedPrecondition, errs.ReasonNoChoice,
				"no %s session is waiting for an account choice", agent).With("agent", agent)
		}
		act, err := mg.st.ActiveAccount(ctx, agent)
		if err != nil {
			return "", nil, err
		}
		to, why := act.Name, ""
		if approve && act.Name == c.From {
			if to, err = mg.approve(ctx, agent, c, act); err != nil || to == "" {
				return "", nil, err
			}
			why = "at its usage limit; switch approved"
		}
		ok, err := mg.st.ResolveChoice(ctx, agent, c, owedFor(agent, c, to, why))
		if err != nil {
			return "", nil, err
		}
		if !ok {
			continue // a session joined, or another answer came: read again
		}
		mg.lg.Info("fleet account choice answered", zap.String("agent", agent), zap.Bool("approve", approve), zap.String("active", to))
		mg.writeAnswerOwed(ctx, agent)
		return to, c.Sessions, nil
	}
	return "", nil, errs.New(errs.KindAborted, errs.ReasonConflict, "the %s account choice kept changing; retry", agent)
}

// approve moves the fleet off the limited account c.From to the one with
// the most headroom ("" with no error: another activation won; the caller
// reads again).
func (mg *Manager) approve(ctx context.Context, agent string, c quota.Choice, act quota.Active) (string, error) {
	accounts, err := mg.st.ListAccounts(ctx, agent)
	if err != nil {
		return "", err
	}
	next := Pick(accounts, c.From, mg.now())
	if next == "" {
		return "", errs.New(errs.KindFailedPrecondition, errs.ReasonNoHeadroom,
			"no other %s account has headroom now; `cast account deny --agent %s` waits for %s's reset, or add an account", agent, agent, c.From)
	}
	ok, err := mg.activate(ctx, agent, next, act, "approved", quota.SwitchNotice{})
	if err != nil || !ok {
		return "", err
	}
	if _, err := mg.st.UpdateAccount(ctx, agent, c.From, func(r *quota.Account) { r.Switches++ }); err != nil {
		mg.lg.Warn("count switch failed", zap.Error(err))
	}
	return next, nil
}

// dropChoice clears agent's pending choice once the fleet's account
// changed by other means (`cast account use`, or the reset): the parked
// sessions run then, and each gets the notice why.
func (mg *Manager) dropChoice(ctx context.Context, agent, to, why string) {
	c, err := mg.st.Choice(ctx, agent)
	if err != nil || c.From == "" {
		return
	}
	if ok, err := mg.st.ResolveChoice(ctx, agent, c, owedFor(agent, c, to, why)); err != nil || !ok {
		return
	}
	mg.writeAnswerOwed(ctx, agent)
}

// writeAnswerOwed is writeChoiceOwed past the caller's end, bounded: the
// answer has committed, and the sessions it held must hear of it even if
// the caller has gone.
func (mg *Manager) writeAnswerOwed(ctx context.Context, agent string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), broadcastTimeout)
	defer cancel()
	_ = mg.writeChoiceOwed(ctx, agent, "") // logged; the sweep writes what failed
}

// owedFor is the notices answering c owes: each held session's (the
// switch to to, for why; why "" is a denied switch), after those an
// earlier answer still owes. They are recorded in the write that resolves
// c, so one whose append fails is written again under its client id.
func owedFor(agent string, c quota.Choice, to, why string) []quota.SwitchNotice {
	owed := slices.Clone(c.Owed)
	for _, id := range c.Sessions {
		m := notice(agent, c.From, to, why, c.Until)
		n := quota.SwitchNotice{Session: id, ClientID: m.ClientId, Text: m.Text}
		if why == "" {
			n.Type = transcript.NoticeAccountChoice
			n.Text = fmt.Sprintf("Staying on account %s (switch denied): this session continues when its window resets at %s.",
				c.From, c.Until.UTC().Format(time.RFC3339))
		}
		owed = append(owed, n)
	}
	return owed
}

// writeChoiceOwed writes the notices agent's choice owes (pending or
// resolved) and keeps only those that failed, for the sweep to write again
// (a rewrite of one that did land is kept once by the store); one whose
// session was removed is dropped. It returns the failure of a notice owed
// to session, if any.
func (mg *Manager) writeChoiceOwed(ctx context.Context, agent, session string) error {
	c, err := mg.st.Choice(ctx, agent)
	if err != nil || len(c.Owed) == 0 {
		return err
	}
	var failed []quota.SwitchNotice
	var mine error
	for _, n := range c.Owed {
		err := mg.writeOwed(ctx, n.Session, agent, n)
		if e, ok := errs.As(err); ok && e.Kind == errs.KindNotFound {
			// Its session was removed: no write will ever land.
			mg.lg.Info("account choice notice dropped: its session is gone", zap.String("agent", agent), zap.String("session", n.Session))
			continue
		}
		if err != nil {
			mg.lg.Warn("account choice notice failed", zap.String("agent", agent), zap.String("session", n.Session), zap.Error(err))
			failed = append(failed, n)
			if n.Session == session && mine == nil {
				mine = err
			}
		}
	}
	if len(failed) == len(c.Owed) {
		return mine // nothing to clear
	}
	if _, err := mg.st.SetChoiceOwed(ctx, agent, c, failed); err != nil {
		mg.lg.Warn("clear written account choice notices failed", zap.String("agent", agent), zap.Error(err))
	}
	return mine
}

// SetPolicy sets what a usage limit on one account does ("" follows the
// fleet's policy).
func (mg *Manager) SetPolicy(ctx context.Context, agent, name, policy string) (*castv1.Account, error) {
	if err := validate(agent, name); err != nil {
		return nil, err
	}
	if policy != "" && !validPolicy(policy) {
		return nil, errs.Invalid("policy %q: use ask, auto, resume or off (empty follows the fleet's)", policy).With("field", "policy")
	}
	r, err := mg.st.UpdateAccount(ctx, agent, name, func(r *quota.Account) { r.Policy = policy })
	if err != nil {
		return nil, err
	}
	act, err := mg.st.ActiveAccount(ctx, agent)
	if err != nil {
		return nil, err
	}
	a := toProto(r, act.Name == name)
	a.Policy = mg.policy(r)
	return a, nil
}
