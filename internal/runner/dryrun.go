package runner

import (
	"errors"
	"fmt"

	"github.com/cast-dev/cast/internal/agents"
)

// CommandLine returns the argv Run would execute for t (binary first)
// without running anything, for `cast exec --dry-run`. The binary is the
// resolved path when the CLI is found, else its bare name.
func (r *Runner) CommandLine(t Turn) ([]string, error) {
	a, ok := agents.Lookup(t.Agent)
	if !ok {
		return nil, fmt.Errorf("unknown agent %q", t.Agent)
	}
	env := buildEnv(a, t)
	bin, err := r.lookBin(a, env)
	if err != nil {
		bin = a.Binary
	}
	d, err := newDriver(a, t, r.logf)
	var rerr *Error
	if errors.As(err, &rerr) && rerr.Reason == ReasonUnsupported {
		return registryLine(a, bin, t)
	}
	if err != nil {
		return nil, err
	}
	args, err := d.args()
	if err != nil {
		return nil, err
	}
	return append(append([]string{bin}, args...), t.Args...), nil
}

// registryLine is the command for agents the runner cannot drive here
// (their CLIs are not installable): the registry's headless form.
func registryLine(a agents.Agent, bin string, t Turn) ([]string, error) {
	if a.Commands.Headless == nil {
		return nil, fmt.Errorf("%s has no headless command form", a.DisplayName)
	}
	vars := map[string]string{"prompt": t.Prompt, "model": t.Model, "effort": t.Effort}
	args, err := agents.Expand(a.Commands.Headless, vars)
	if err != nil {
		return nil, err
	}
	for _, opt := range []struct {
		set  bool
		tmpl []string
	}{{t.Model != "", a.Commands.Model}, {t.Effort != "", a.Commands.Effort}} {
		if !opt.set || opt.tmpl == nil {
			continue
		}
		m, err := agents.Expand(opt.tmpl, vars)
		if err != nil {
			return nil, err
		}
		args = append(args, m...)
	}
	return append(append([]string{bin}, args...), t.Args...), nil
}
