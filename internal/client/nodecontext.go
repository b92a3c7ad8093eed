package client

import "cmp"

// RecordNode notes node as this machine's node (a new session made here
// without --node goes to it) in the context that talks to addr: the one
// --context (flag) or CAST_CONTEXT names, else the current one, when its
// address is addr; with no context at all, a new current context
// "default" for addr (trusting the CA by pin). It returns the context it
// wrote, "" when none fits (another control plane's context is in use).
func RecordNode(getenv func(string) string, flag, addr, pin, node string) (string, error) {
	path := ConfigPath(getenv)
	cfg, err := LoadConfig(path)
	if err != nil {
		return "", err
	}
	name := cmp.Or(flag, getenv("CAST_CONTEXT"), cfg.CurrentContext)
	if name == "" && len(cfg.Contexts) == 0 {
		return DefaultContext, SetContext(path, DefaultContext, Context{Addr: addr, CAPin: pin, Node: node})
	}
	if c := cfg.Contexts[name]; c == nil || c.Addr != addr {
		return "", nil
	}
	return name, UpdateContext(path, name, func(c *Context) { c.Node = node })
}

// DefaultContext is the context RecordNode makes when there is none.
const DefaultContext = "default"
