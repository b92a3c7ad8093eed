package cli

import "github.com/spf13/cobra"

// anyRest is sessionArg's rest for a command whose other arguments are
// a message of any length (send, merge).
const anyRest = -1

// sessionFlag gives cmd the hidden -s/--session alias of its session
// argument: every command that takes a session id takes it first, as an
// argument, and -s ID still works (scripts written when only some
// commands took it positionally), hidden on all of them alike.
func sessionFlag(cmd *cobra.Command, id *string) {
	cmd.Flags().StringVarP(id, "session", "s", "", "session id (the ID argument)")
	_ = cmd.Flags().MarkHidden("session")
}

// sessionArg returns the session a command acts on: the first argument,
// or -s ID (sessionFlag); the rest are the command's other arguments, at
// most rest of them (anyRest: any number). fallback (CAST_SESSION, where
// a command defaults to it) is used when neither names one; hint says how
// to name one.
func sessionArg(flag string, args []string, rest int, fallback, hint string) (string, []string, error) {
	var id string
	switch {
	case flag != "":
		id = flag
	case len(args) > 0:
		id, args = args[0], args[1:]
	case fallback != "":
		id = fallback
	default:
		return "", nil, usagef("which session? %s", hint)
	}
	if rest != anyRest && len(args) > rest {
		if flag != "" && rest == 0 {
			return "", nil, usagef("name the session once: ID or -s ID, not both")
		}
		return "", nil, usagef("unexpected argument %q; %s", args[rest], hint)
	}
	return id, args, nil
}

// sessionArgs is the Args check of a command taking a session and at
// most rest other arguments: the count itself is checked by sessionArg,
// which knows whether -s named the session.
func sessionArgs(rest int) cobra.PositionalArgs {
	if rest == anyRest {
		return cobra.ArbitraryArgs
	}
	return cobra.MaximumNArgs(rest + 1)
}
