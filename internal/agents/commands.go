package agents

import (
	"fmt"
	"slices"
)

// Form is one of an agent's headless command forms.
type Form int

const (
	FormFresh  Form = iota // a new session (Commands.Headless)
	FormResume             // a turn in an existing session (Commands.Resume)
	FormFork               // a turn in a native fork of a session (Commands.Fork)
)

// Args is the CLI's argument list for a headless turn in form f: the
// registry's template, the usage flags when usage is reported, then the
// model and effort flags when vars set them. The runner, `--dry-run` and
// the real-CLI template tests all build argv here, so the form tested is
// the form production runs.
func (a Agent) Args(f Form, vars map[string]string, usage bool) ([]string, error) {
	c := a.Commands
	tmpl := c.Headless
	switch f {
	case FormResume:
		tmpl = c.Resume
	case FormFork:
		tmpl = c.Fork
	}
	if tmpl == nil {
		return nil, fmt.Errorf("%s has no headless command", a.DisplayName)
	}
	args, err := Expand(tmpl, vars)
	if err != nil {
		return nil, err
	}
	if usage {
		args = append(args, c.Usage...)
	}
	for _, opt := range []struct {
		set  bool
		tmpl []string
	}{{vars["model"] != "", c.Model}, {vars["effort"] != "", c.Effort}} {
		if !opt.set || opt.tmpl == nil {
			continue
		}
		x, err := Expand(opt.tmpl, vars)
		if err != nil {
			return nil, err
		}
		args = append(args, x...)
	}
	return args, nil
}

// NeedsIDUpFront says whether form f takes the new session's id from cast
// ({id} in a fresh form, {new} in a fork), so the runner picks one and
// knows the file before the CLI writes it.
func (a Agent) NeedsIDUpFront(f Form) bool {
	switch f {
	case FormFresh:
		return slices.Contains(a.Commands.Headless, "{id}")
	case FormFork:
		return slices.Contains(a.Commands.Fork, "{new}")
	}
	return false
}
