package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/canary"
	"github.com/cast-dev/cast/internal/cmdrun"
	"github.com/cast-dev/cast/internal/nodebin"
	"github.com/cast-dev/cast/internal/runner"
)

// What the cast CLI runs this binary for (internal/nodebin), so the CLI
// links neither the runner nor the canary: hidden, like the flags
// controlplane --dev gives its node, they are the CLI's protocol and no
// one else's commands. Each writes one JSON reply on stdout.

// addCLICommands adds them to the daemon's root, whose help stays as it
// was: no commands to show, so no help or completion command either.
func addCLICommands(root *cobra.Command) {
	root.AddCommand(checkAgentCommand(), commandLineCommand())
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetHelpCommand(&cobra.Command{Use: "no-help", Hidden: true})
}

// checkAgentCommand is `cast agents check`'s canary of one agent's CLI.
func checkAgentCommand() *cobra.Command {
	var agent, bin string
	var exitWithParent bool
	cmd := &cobra.Command{
		Use:    nodebin.CheckAgentCommand + " --agent A --bin PATH",
		Short:  "Run the conformance canary of one installed agent CLI (for cast agents check); print its result as JSON",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if exitWithParent {
				var stop context.CancelFunc
				ctx, stop = cmdrun.UntilClosed(ctx, os.Stdin, zap.NewNop())
				defer stop()
			}
			res, err := (&canary.Checker{}).Run(ctx, agent, bin)
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "the agent")
	cmd.Flags().StringVar(&bin, "bin", "", "its CLI")
	cmd.Flags().BoolVar(&exitWithParent, nodebin.ExitWithParent, false, "stop when stdin closes: the cast CLI that started this is gone")
	_ = cmd.MarkFlagRequired("agent")
	_ = cmd.MarkFlagRequired("bin")
	return cmd
}

// commandLineCommand is `cast exec --dry-run`'s command line of one turn:
// a nodebin.LineRequest on stdin (a prompt may be longer than one
// argument may be), the runner's command for it on stdout.
func commandLineCommand() *cobra.Command {
	return &cobra.Command{
		Use:    nodebin.CommandLineCommand,
		Short:  "Print the command the runner would start for the turn on stdin (for cast exec --dry-run), as JSON",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var req nodebin.LineRequest
			if err := json.NewDecoder(cmd.InOrStdin()).Decode(&req); err != nil {
				return err
			}
			t := runner.Turn{Agent: req.Agent, Model: req.Model, Cwd: req.Cwd, Prompt: req.Prompt, Home: req.Home}
			c, err := (&runner.Runner{}).CommandLine(t.On(req.NodeHome, req.NodeAgentDir))
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(nodebin.Line{Argv: c.Argv, Stdin: c.Stdin, PromptOnStdin: c.PromptOnStdin, Note: c.Note})
		},
	}
}
