package fleet

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/quota"
)

// Pick chooses the account to switch to when from hits its limit: an
// account whose window is open (never limited, or its limit passed), with
// the most headroom first: the lowest use of its fullest unreset window as
// the provider last reported it (unknown counts as unused), then the one
// limited longest ago, then by name. "" means every account is limited:
// the fleet waits for the earliest reset (the sweep re-activates the
// account whose window opens first).
func Pick(accounts []*quota.Account, from string, now time.Time) string {
	return PickLoaded(accounts, from, now, nil)
}

// PickLoaded is Pick with the reservation ledger: load adds to each
// account's use what its running turns are expected to take, so parallel
// turns spread over the accounts with headroom instead of piling onto the
// freshest one.
func PickLoaded(accounts []*quota.Account, from string, now time.Time, load map[string]float64) string {
	var open []*quota.Account
	for _, a := range accounts {
		if a.Name != from && !a.Limited(now) {
			open = append(open, a)
		}
	}
	sort.Slice(open, func(i, j int) bool {
		if ui, uj := open[i].Used(now)+load[open[i].Name], open[j].Used(now)+load[open[j].Name]; ui != uj {
			return ui < uj
		}
		if !open[i].LastLimited.Equal(open[j].LastLimited) {
			return open[i].LastLimited.Before(open[j].LastLimited)
		}
		return open[i].Name < open[j].Name
	})
	if len(open) == 0 {
		return ""
	}
	return open[0].Name
}

// fleetLogin is agent's fleet credential store (agents.Login.Fleet):
// false for an agent whose store cast cannot rewrite.
func fleetLogin(agent string) (agents.FleetLogin, bool) {
	a, _ := agents.Lookup(agent)
	if f := a.Login.Fleet; f != nil {
		return *f, true
	}
	return agents.FleetLogin{}, false
}

// Agents lists the agents fleet accounts work for.
func Agents() []string { return agents.FleetAgents() }

// notFleet is the error for an agent fleet accounts do not cover. It names
// those they do from the registry, so a new fleet agent needs no edit here.
func notFleet(agent string) error {
	names := Agents()
	list := strings.Join(names, " and ")
	if n := len(names); n > 2 {
		list = strings.Join(names[:n-1], ", ") + " and " + names[n-1]
	}
	return errs.Invalid("fleet accounts work for %s, not %q", list, agent).With("agent", agent)
}

// CheckCredential says whether cred is a credential store agent reads.
func CheckCredential(agent string, cred []byte) error {
	fl, ok := fleetLogin(agent)
	if !ok {
		return notFleet(agent)
	}
	var v map[string]any
	if err := json.Unmarshal(cred, &v); err != nil {
		return fmt.Errorf("the credential is not a JSON object (%s)", fl.Check(nil))
	}
	return fl.Check(v)
}
