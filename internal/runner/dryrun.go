package runner

import (
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
	if err != nil {
		return nil, err
	}
	args, err := d.args()
	if err != nil {
		return nil, err
	}
	return append(append([]string{bin}, args...), t.Args...), nil
}
