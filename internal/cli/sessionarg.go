package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/validate"
)

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
	if err := checkSessionID(id); err != nil {
		return "", nil, err
	}
	if rest != anyRest && len(args) > rest {
		if flag != "" && rest == 0 {
			return "", nil, usagef("name the session once: ID or -s ID, not both")
		}
		return "", nil, usagef("unexpected argument %q; %s", args[rest], hint)
	}
	return id, args, nil
}

// checkSessionID refuses what cannot be a session id (a typo, a node's
// name, a path) before anything is sent, saying what ids look like.
func checkSessionID(id string) error {
	if err := validate.Need(validate.SessionID, "session", id); err != nil {
		return usageError{err}
	}
	return nil
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

// sessionUse says how a command names the session it acts on.
type sessionUse struct {
	rest int    // other arguments at most (anyRest: any number)
	env  string // the variable naming the session when no argument does ("": none)
	hint string // how to name one, for the usage error
}

// onSession makes cmd act on one session: its Args, its RunE (which reads
// the session as sessionArg does and calls run with it and the other
// arguments) and its hidden -s flag (sessionFlag).
func onSession(cmd *cobra.Command, u sessionUse, run func(cmd *cobra.Command, id string, args []string) error) *cobra.Command {
	var flag string
	cmd.Args = sessionArgs(u.rest)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		fallback := ""
		if u.env != "" {
			fallback = os.Getenv(u.env)
		}
		id, args, err := sessionArg(flag, args, u.rest, fallback, u.hint)
		if err != nil {
			return err
		}
		return run(cmd, id, args)
	}
	sessionFlag(cmd, &flag)
	return cmd
}
