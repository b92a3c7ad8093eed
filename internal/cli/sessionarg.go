package cli

// sessionArg returns the session a command acts on: the first argument,
// as every command takes it, or -s ID (kept as an alias); the rest are the
// command's other arguments (more: it takes some, like send's MESSAGE).
// fallback (CAST_SESSION, where a command defaults to it) is used when
// neither names one; hint says how to name one.
func sessionArg(flag string, args []string, more bool, fallback, hint string) (string, []string, error) {
	switch {
	case flag != "" && len(args) > 0 && !more:
		return "", nil, usagef("name the session once: ID or -s ID, not both")
	case flag != "":
		return flag, args, nil
	case len(args) > 0:
		return args[0], args[1:], nil
	case fallback != "":
		return fallback, args, nil
	}
	return "", nil, usagef("which session? %s", hint)
}
