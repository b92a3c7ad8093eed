package cli

import (
	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/validate"
)

// flagKinds are the flags whose values reach an agent's argv or the
// session record: they are checked with the control plane's own rules
// (internal/validate) before anything is sent or run.
var flagKinds = map[string]validate.Kind{
	"model":  validate.Model,
	"effort": validate.Model,
	"title":  validate.Title,
}

// checkFlags refuses a malformed --model or --effort (one starting with
// '-' would be read as a flag by the agent's parser) up front.
func checkFlags(cmd *cobra.Command, _ []string) error {
	for name, kind := range flagKinds {
		f := cmd.Flags().Lookup(name)
		if f == nil || !f.Changed {
			continue
		}
		if err := validate.Check(kind, "--"+name, f.Value.String()); err != nil {
			return usageError{err}
		}
	}
	return nil
}

// checkText refuses text agents cannot take (NUL bytes), as read from
// arguments or stdin, before it is sent.
func checkText(text string) error {
	if err := validate.Check(validate.Prompt, "the message", text); err != nil {
		return usageError{err}
	}
	return nil
}
