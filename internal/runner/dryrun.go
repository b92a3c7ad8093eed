package runner

import (
	"errors"
	"fmt"

	"github.com/cast-dev/cast/internal/agents"
)

// Command is what Run would start for a turn.
type Command struct {
	Argv []string // binary first
	// Stdin is what the CLI reads on stdin: the prompt, when PromptOnStdin
	// (the agent's Commands.PromptStdin); the prompt is then not in Argv.
	Stdin         string
	PromptOnStdin bool
	// Note, when set, says how the prompt reaches the agent besides
	// Argv and Stdin (a Codex prompt over its one-turn cap goes in as
	// history first; Argv then resumes the thread it makes, THREAD).
	Note string
}

// CommandLine returns the command Run would execute for t without running
// anything, for `cast exec --dry-run`. The binary is the resolved path when
// the CLI is found, else its bare name.
func (r *Runner) CommandLine(t Turn) (Command, error) {
	a, ok := agents.Lookup(t.Agent)
	if !ok {
		return Command{}, fmt.Errorf("unknown agent %q", t.Agent)
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
		return Command{}, err
	}
	var note string
	large, err := d.largePrompt()
	if err != nil {
		return Command{}, err
	}
	if large {
		id, path := d.id, d.path
		if id == "" && path == "" {
			id = "THREAD"
		}
		d.asLarge(id, path)
		note = d.largeNote()
	}
	args, err := d.args()
	if err != nil {
		return Command{}, err
	}
	c := Command{Argv: append(append([]string{bin}, args...), t.Args...), Note: note}
	c.Stdin, c.PromptOnStdin = d.stdin()
	return c, nil
}

// registryLine is the command for agents the runner cannot drive here
// (their CLIs are not installable): the registry's headless form.
func registryLine(a agents.Agent, bin string, t Turn) (Command, error) {
	vars := map[string]string{"prompt": t.Prompt, "model": t.Model, "effort": t.Effort}
	args, err := a.Args(agents.FormFresh, vars, false)
	if err != nil {
		return Command{}, err
	}
	c := Command{Argv: append(append([]string{bin}, args...), t.Args...)}
	if a.Commands.PromptStdin {
		c.Stdin, c.PromptOnStdin = t.Prompt, true
	}
	return c, nil
}

// On returns t as a node runs it whose turns of t's agent get HOME home
// and keep the agent's own folder in agentDir (what the node advertises),
// so CommandLine shows the paths that node would use. Empty values keep
// t's.
func (t Turn) On(home, agentDir string) Turn {
	if home != "" {
		t.Home = home
	}
	if a, ok := agents.Lookup(t.Agent); ok && a.HomeEnv != "" && agentDir != "" {
		t.Env = append(append([]string(nil), t.Env...), a.HomeEnv+"="+agentDir)
	}
	return t
}
