package nodebin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/cast-dev/cast/internal/capability"
)

// The node binary's hidden subcommands that the cast CLI runs (cmd/node
// implements them): each writes one JSON reply on stdout.
const (
	// CheckAgentCommand runs the conformance canary of one agent's CLI
	// (--agent, --bin) and replies with its capability.Result.
	CheckAgentCommand = "check-agent"
	// CommandLineCommand reads a LineRequest on stdin and replies with the
	// Line the node's runner would start for it.
	CommandLineCommand = "command-line"
	// ExitWithParent is the flag (--exit-with-parent) that makes a long subcommand stop when its
	// stdin, a pipe from the CLI, closes.
	ExitWithParent = "exit-with-parent"
)

// LineRequest is one turn of a `cast exec --dry-run`.
type LineRequest struct {
	Agent  string `json:"agent"`
	Model  string `json:"model,omitempty"`
	Cwd    string `json:"cwd"`
	Prompt string `json:"prompt"`
	Home   string `json:"home"` // the turn's HOME where no node says its own
	// NodeHome and NodeAgentDir are what the node that would run the turn
	// advertises for the agent (empty: unknown), so the line shows its paths.
	NodeHome     string `json:"node_home,omitempty"`
	NodeAgentDir string `json:"node_agent_dir,omitempty"`
}

// Line is the command the runner would start for a turn.
type Line struct {
	Argv []string `json:"argv"` // binary first
	// Stdin is what the CLI reads on stdin: the prompt, when PromptOnStdin;
	// the prompt is then not in Argv.
	Stdin         string `json:"stdin,omitempty"`
	PromptOnStdin bool   `json:"prompt_on_stdin,omitempty"`
	// Note, when set, says how the prompt reaches the agent besides Argv
	// and Stdin.
	Note string `json:"note,omitempty"`
}

// stopTimeout bounds a child's clean stop, after its lifeline closed,
// before it is killed.
const stopTimeout = 30 * time.Second

// CheckAgent runs the canary of agent's CLI at agentBin through the node
// binary nodeBin (a child with this process's environment; its stderr goes
// to errOut). Its stdin is its lifeline: when ctx ends or this process dies
// in any way, the pipe closes and the node stops the CLI it runs.
func CheckAgent(ctx context.Context, nodeBin, agent, agentBin string, errOut io.Writer) (capability.Result, error) {
	var res capability.Result
	cmd := exec.CommandContext(ctx, nodeBin, CheckAgentCommand, "--agent", agent, "--bin", agentBin, "--"+ExitWithParent)
	lifeline, err := cmd.StdinPipe()
	if err != nil {
		return res, err
	}
	cmd.Cancel, cmd.WaitDelay = lifeline.Close, stopTimeout
	err = run(cmd, errOut, &res)
	return res, err
}

// CommandLine asks the node binary nodeBin what its runner would start
// for req.
func CommandLine(ctx context.Context, nodeBin string, req LineRequest, errOut io.Writer) (Line, error) {
	var line Line
	in, err := json.Marshal(req)
	if err != nil {
		return line, err
	}
	cmd := exec.CommandContext(ctx, nodeBin, CommandLineCommand)
	cmd.Stdin = bytes.NewReader(in)
	err = run(cmd, errOut, &line)
	return line, err
}

// run runs cmd and decodes its one JSON reply into reply.
func run(cmd *exec.Cmd, errOut io.Writer, reply any) error {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", cmd.Path, cmd.Args[1], err)
	}
	if err := json.Unmarshal(out.Bytes(), reply); err != nil {
		return fmt.Errorf("%s %s replied %.200q: %w", cmd.Path, cmd.Args[1], out.String(), err)
	}
	return nil
}
