package fleet

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/agents"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/quota"
)

// fleetPolicy is what a limit does for agent's fleet as a whole: the
// configured policy, except that an agent whose sessions cannot continue
// on another account (agents.Capabilities.AccountSwitch) never switches,
// so auto means resume there. Codex switches too: the node rebuilds a
// session's rollout for the new account without the old one's encrypted
// reasoning (agents.Capabilities.NativeAccountBound).
func (mg *Manager) fleetPolicy(agent string) string {
	if mg.cfg.Policy == PolicyAuto && !switchable(agent) {
		return PolicyResume
	}
	return mg.cfg.Policy
}

// switchable says whether agent's sessions can continue on another
// account.
func switchable(agent string) bool {
	a, _ := agents.Lookup(agent)
	return a.Caps.AccountSwitch
}

// policy is what a limit on account r does: its own policy, else its
// fleet's (an account set to auto still only resumes where the agent
// cannot switch).
func (mg *Manager) policy(r *quota.Account) string {
	p := r.Policy
	if p == "" {
		p = mg.fleetPolicy(r.Agent)
	}
	if p == PolicyAuto && !switchable(r.Agent) {
		return PolicyResume
	}
	return p
}

// Fleets says, per agent with accounts (one agent's with agent set), what a
// limit does and where a switch would go now: the account with the most
// headroom other than the active one.
func (mg *Manager) Fleets(ctx context.Context, agent string) ([]*castv1.FleetPolicy, error) {
	agents := Agents()
	if agent != "" {
		agents = []string{agent}
	}
	now := mg.now()
	var out []*castv1.FleetPolicy
	for _, ag := range agents {
		accounts, err := mg.st.ListAccounts(ctx, ag)
		if err != nil {
			return nil, err
		}
		if len(accounts) == 0 {
			continue
		}
		act, err := mg.st.ActiveAccount(ctx, ag)
		if err != nil {
			return nil, err
		}
		fp := &castv1.FleetPolicy{Agent: ag, Policy: mg.fleetPolicy(ag), Active: act.Name}
		c, err := mg.st.Choice(ctx, ag)
		if err != nil {
			return nil, err
		}
		if c.From != "" {
			until, since := timestamppb.New(c.Until), timestamppb.New(c.Since)
			// Both: until and since for readers older than the *_time fields (AIP-142).
			fp.Pending = &castv1.AccountChoice{From: c.From, Sessions: c.Sessions,
				Until: until, LimitEndTime: until, Since: since, CreateTime: since}
		}
		if best := Pick(accounts, act.Name, now); best != "" {
			fp.Best = best
			for _, a := range accounts {
				if a.Name == best {
					fp.BestUsedPercent = a.Used(now)
				}
			}
		}
		out = append(out, fp)
	}
	return out, nil
}
