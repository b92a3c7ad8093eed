package fleet

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

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

// credentialFiles are the agents whose shared credential store cast can
// rewrite, and the check each credential must pass before it is stored
// (what the CLI reads, from the research notes on the pinned versions).
var credentialChecks = map[string]func(map[string]any) error{
	// $CLAUDE_CONFIG_DIR/.credentials.json, re-read by claude mid-run.
	"claude": func(v map[string]any) error {
		o, _ := v["claudeAiOauth"].(map[string]any)
		if tok, _ := o["accessToken"].(string); tok == "" {
			return fmt.Errorf(`a Claude credential is .credentials.json with {"claudeAiOauth":{"accessToken":...}}`)
		}
		return nil
	},
	// $CODEX_HOME/auth.json (API key or ChatGPT tokens).
	"codex": func(v map[string]any) error {
		if k, _ := v["OPENAI_API_KEY"].(string); k != "" {
			return nil
		}
		if t, _ := v["tokens"].(map[string]any); t != nil {
			return nil
		}
		return fmt.Errorf(`a Codex credential is auth.json with "OPENAI_API_KEY" or "tokens"`)
	},
}

// Agents lists the agents fleet accounts work for.
func Agents() []string { return []string{"claude", "codex"} }

// CheckCredential says whether cred is a credential store agent reads.
func CheckCredential(agent string, cred []byte) error {
	check, ok := credentialChecks[agent]
	if !ok {
		return fmt.Errorf("fleet accounts work for claude and codex, not %q", agent)
	}
	var v map[string]any
	if err := json.Unmarshal(cred, &v); err != nil {
		return fmt.Errorf("the credential is not a JSON object (%s)", check(nil))
	}
	return check(v)
}
