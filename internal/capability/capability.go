// Package capability names what cast relies on an agent CLI to do with a
// history it did not write, as the canaries check it (internal/canary) and
// the control plane and the moves gate on it: the names alone, so the
// control plane links neither the canary's runner nor its fake model.
package capability

import "github.com/cast-dev/cast/internal/agents"

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
