package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/validate"
)

// flagKinds are the flags whose values reach an agent's argv or the
// session record, or name a session or a node: they are checked with the
// control plane's own rules (internal/validate) before anything is sent
// or run, so a malformed one is a usage mistake that says what the value
// looks like, on every command that has the flag.
var flagKinds = map[string]validate.Kind{
	"model":   validate.Model,
	"effort":  validate.Model,
	"title":   validate.Title,
	"session": validate.SessionID, // the hidden -s of a session argument, or of spawn's and import's --parent
	"parent":  validate.SessionID,
	"resume":  validate.SessionID,
	"node":    validate.Name,
	"name":    validate.Name, // token create's owner, node join's node
	"account": validate.Name, // handoff's, a name as account rm's NAME is
	"label":   validate.Name, // a node's label (node ls, migrate start, drain)
	"to":      validate.Name, // a node or label (migrate start, drain); handoff's old name of --agent
	"from":    validate.Name, // migrate start's node (watch's --from is a seq, not a string: not checked here)
}

// sameAgent is the --agent value that keeps the source's agent, where a
// command's --agent takes it (the flag is annotated with it: handoff).
const sameAgent = "same"

// checkFlags refuses a malformed --model or --effort (one starting with
// '-' would be read as a flag by the agent's parser), session id, node
// name or --ca-pin, and a --timeout of 0 or less, up front.
func checkFlags(cmd *cobra.Command, _ []string) error {
	if f := cmd.Flags().Lookup("agent"); f != nil && f.Changed && !(f.Value.String() == sameAgent && f.Annotations[sameAgent] != nil) {
		if err := checkAgent(f.Value.String()); err != nil {
			return err
		}
	}
	if f := cmd.Flags().Lookup("timeout"); f != nil && f.Changed {
		// Every call would expire before it is sent.
		if d, err := cmd.Flags().GetDuration("timeout"); err == nil && d <= 0 {
			return usagef("--timeout must be more than 0, e.g. 30s")
		}
	}
	if f := cmd.Flags().Lookup("ca-pin"); f != nil && f.Changed && f.Value.String() != "" && !pki.ValidPin(f.Value.String()) {
		// Every command alike: set-context would store a pin no call can
		// use, and ca would say it as a failed request.
		return usagef("--ca-pin %q is not a CA pin; give %s and 64 hex digits, as the control plane logs it (ca_pin)", f.Value.String(), pki.PinPrefix)
	}
	for name, kind := range flagKinds {
		f := cmd.Flags().Lookup(name)
		if f == nil || !f.Changed || f.Value.Type() != "string" {
			continue
		}
		if err := validate.Check(kind, "--"+name, f.Value.String()); err != nil {
			return usageError{err}
		}
	}
	return nil
}

// idArgs is the Args check of a command whose first argument names a
// thing of kind (what says which, "migration id"): count's, then the
// first argument's form, so a malformed one is a usage mistake before
// anything is sent, saying what it looks like (the control plane's rule).
func idArgs(count cobra.PositionalArgs, kind validate.Kind, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := count(c, args); err != nil {
			return err
		}
		if len(args) == 0 {
			return nil
		}
		return validate.Check(kind, what, args[0])
	}
}

// flagFile is the error of reading the file a flag names at path: one
// that is not there is a usage mistake naming the flag (as a missing
// --cwd folder is), whichever command reads it; other errors stay as
// they are.
func flagFile(flag, path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return usagef("%s %s: no such file", flag, path)
	}
	return err
}

// checkText refuses text agents cannot take (NUL bytes), as read from
// arguments or stdin, before it is sent.
func checkText(text string) error {
	if err := validate.Check(validate.Prompt, "the message", text); err != nil {
		return usageError{err}
	}
	return nil
}

// checkAgent refuses an --agent no cast knows (a typo) as a usage
// mistake, with the known names nearest to it.
func checkAgent(name string) error {
	known := agents.Names()
	if name == "" || slices.Contains(known, name) {
		return nil
	}
	var near []string
	for _, k := range known {
		if strings.HasPrefix(k, name) || strings.HasPrefix(name, k) || editDistance(name, k) <= 2 {
			near = append(near, k)
		}
	}
	return usagef("unknown agent %q;%s known agents: %s", name, didYouMean(near), strings.Join(known, ", "))
}

// didYouMean is " did you mean "a"?" for a list of suggestions ("" for none).
func didYouMean(near []string) string {
	if len(near) == 0 {
		return ""
	}
	q := make([]string, len(near))
	for i, n := range near {
		q[i] = fmt.Sprintf("%q", n)
	}
	return " did you mean " + strings.Join(q, " or ") + "?"
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
