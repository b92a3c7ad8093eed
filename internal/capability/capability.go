// Package capability names what cast relies on an agent CLI to do with a
// history it did not write, as the canaries check it (internal/canary) and
// the control plane and the moves gate on it, and a canary's verdicts: the
// names and results alone, so the control plane and the CLI link neither
// the canary's runner nor its fake model.
package capability

import (
	"github.com/cast-dev/cast/internal/agents"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// The capabilities a canary checks, in the order it checks them.
const (
	Write  = "write"  // cast's writer produces the native session
	Resume = "resume" // the CLI resumes it and the model gets the history
	Append = "append" // the turn's answer is synced back while it runs
	Read   = "read"   // the native session reads back whole, in order
	Fork   = "fork"   // the CLI's own fork carries the history
)

// All are every capability, in check order.
var All = []string{Write, Resume, Append, Read, Fork}

// Takeover are the capabilities a session needs to move into an agent
// with its history (a switch, a rebuilt fork, a migration).
var Takeover = []string{Write, Resume, Append, Read}

// Checkable reports whether agent has a canary: cast writes its sessions
// and its CLI resumes them.
func Checkable(agent string) bool {
	a, ok := agents.Lookup(agent)
	return ok && a.Caps.CanReconstitute && a.Commands.Resume != nil && a.Binary != ""
}

// Agents are the agents with a canary, sorted.
func Agents() []string {
	var out []string
	for _, n := range agents.Names() {
		if Checkable(n) {
			out = append(out, n)
		}
	}
	return out
}

// Check is one capability's verdict.
type Check struct {
	Capability string `json:"capability"`
	Passed     bool   `json:"passed"`
	Detail     string `json:"detail,omitempty"` // what went wrong; "" when passed
}

// Result is one agent's canary run, as the node binary reports it to
// `cast agents check` (JSON) and as the checks are recorded.
type Result struct {
	Agent   string  `json:"agent"`
	Version string  `json:"version"` // as the node reports it (agents.InstalledVersion); "" when unknown
	Bin     string  `json:"bin"`
	Checks  []Check `json:"checks"` // only the steps that ran: a step after a failed one it needs is left out
}

// Failed lists the capabilities that failed.
func (r Result) Failed() []string {
	var out []string
	for _, c := range r.Checks {
		if !c.Passed {
			out = append(out, c.Capability)
		}
	}
	return out
}

// Verdicts are r's checks as the control plane records them.
func Verdicts(r Result) []*castv1.AgentCheck {
	out := make([]*castv1.AgentCheck, 0, len(r.Checks))
	for _, c := range r.Checks {
		out = append(out, &castv1.AgentCheck{Agent: r.Agent, Version: r.Version, Capability: c.Capability, Passed: c.Passed, Detail: c.Detail})
	}
	return out
}
