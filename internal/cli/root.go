// Package cli is the cast command line. Every command has --json; messages
// for people are short and say what to do next.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
)

// app is the state shared by all commands.
type app struct {
	addr    string
	context string // --context: a context of ~/.config/cast/config.yaml
	json    bool   // --json, or -o json|yaml: print for scripts (printJSON)
	yaml    bool   // -o yaml: printJSON prints YAML
	output  string // -o of a command that prints data (bindDataOutput)
	docs    int    // documents printJSON printed, to separate YAML's
	timeout time.Duration
	out     io.Writer
	errOut  io.Writer
	in      io.Reader
	tty     bool // stdout is a terminal: control characters are escaped
	cli     *client.Client
	cc      client.Context // what cli dialed, to explain a failed call
	// addrFrom says where cc's address came from (a context, --addr,
	// CAST_ADDR, the default): a remote one nobody answers at is told
	// which to fix.
	addrFrom string
}

// Main runs the CLI with args and returns the process exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{out: stdout, errOut: stderr, in: stdin, tty: isTerminal(stdout)}
	root := a.root()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if a.cli != nil {
		a.cli.Close()
	}
	if err == nil {
		return 0
	}
	var ee execExit
	if errors.As(err, &ee) {
		return ee.code // the agent's own exit code; it printed its reason
	}
	var ie interrupted
	if errors.As(err, &ie) {
		fmt.Fprintf(stderr, "cast: %v\n", err)
		return 130
	}
	var ue usageError
	var nc *client.NoContextError // a --context, CAST_CONTEXT or current context that names none
	if errors.As(err, &ue) || errors.As(err, &nc) {
		fmt.Fprintf(stderr, "cast: %v\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "cast: %s\n", a.explain(err))
	return 1
}

type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// valueKinds says what a flag of each pflag type takes, in words.
var valueKinds = map[string]string{
	"int": "a whole number", "int32": "a whole number", "int64": "a whole number",
	"uint": "a whole number", "uint32": "a whole number", "uint64": "a whole number",
	"float64":  "a number",
	"duration": "a duration such as 30s, 5m or 1h30m",
	"bool":     "true or false",
}

// flagValueError says what a flag takes when its value does not parse,
// rather than pflag's "invalid argument ... strconv.ParseInt: parsing ...".
func flagValueError(err error) error {
	var iv *pflag.InvalidValueError
	if !errors.As(err, &iv) {
		return err
	}
	kind, ok := valueKinds[iv.GetFlag().Value.Type()]
	if !ok {
		return err
	}
	return fmt.Errorf("--%s takes %s, not %q", iv.GetFlag().Name, kind, iv.GetValue())
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:           "cast",
		Short:         "cast keeps coding-agent conversations portable across agents and machines",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&a.addr, "addr", "", "control plane address (default: the context's, else env CAST_ADDR, else "+client.DefaultAddr+")")
	root.PersistentFlags().StringVar(&a.context, "context", "", "context of ~/.config/cast/config.yaml to use (env CAST_CONTEXT; credentials: env CAST_TOKEN or CAST_TOKEN_FILE)")
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print JSON for scripts")
	root.PersistentFlags().DurationVar(&a.timeout, "timeout", 30*time.Second, "deadline for each request")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// A group given an unknown word and then a flag (`cast delete ID
		// --force`) fails on the flag first: the word is the mistake.
		if words := c.Flags().Args(); c.HasSubCommands() && len(words) > 0 {
			return unknownCommand(c, words[0])
		}
		return usageError{flagValueError(err)}
	})
	root.PersistentPreRunE = checkFlags
	root.AddCommand(a.newCmd(), a.sendCmd(), a.readCmd(), a.lsCmd(), a.getCmd(), a.rmCmd(), a.nodesCmd("nodes"), a.watchCmd(),
		a.importCmd(), a.exportCmd(), a.restoreCmd(), a.interruptCmd(), a.switchCmd(), a.forkCmd(), a.spawnCmd(), a.execCmd(), a.diffCmd(),
		a.approveCmd(true), a.approveCmd(false), a.mcpCmd(), a.mergeCmd(), a.handoffCmd(),
		a.migrateCmd(), a.drainCmd(), a.accountCmd(), a.usageCmd(), a.tokenCmd(), a.nodeCmd(), a.versionCmd(),
		a.workspaceCmd(), a.worktreeCmd(), a.agentsCmd(), a.caCmd(), a.configCmd(), a.loginCmd(), a.webCmd())
	root.InitDefaultCompletionCmd() // now, not at Execute, so usageArgs and examples cover it
	a.bindDataOutput(root)          // before usageArgs makes groups runnable
	suggestFor(root)
	usageArgs(root)
	for _, c := range append(allCommands(root), root) {
		// pflag writes a deprecated flag's note to this; cobra's default
		// sends it to the command's stdout, which scripts read.
		c.Flags().SetOutput(a.errOut)
	}
	addExamples(root)
	a.completions(root)
	return root
}

// usageArgs makes every argument mistake a usage error (exit 2, as
// docs/reference.md says): cobra returns wrong argument counts and unknown
// commands as plain errors, and shows help (exit 0) for an unknown
// subcommand of a command group.
func usageArgs(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
	if cmd.HasSubCommands() && !cmd.Runnable() {
		cmd.Args = cobra.ArbitraryArgs
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only on its own error path
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			return unknownCommand(c, args[0])
		}
		return
	}
	check := cmd.Args
	switch {
	case check == nil:
		check = cobra.ArbitraryArgs
	case reflect.ValueOf(check).Pointer() == reflect.ValueOf(cobra.NoArgs).Pointer():
		// cobra.NoArgs calls a stray argument an unknown command, which
		// sends people looking for a subcommand that never existed.
		check = func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("`%s` takes no arguments, got %q", c.CommandPath(), args[0])
			}
			return nil
		}
	}
	cmd.Args = func(c *cobra.Command, args []string) error {
		if err := check(c, args); err != nil {
			return usageError{fmt.Errorf("%w; see `%s --help`", err, c.CommandPath())}
		}
		return nil
	}
}

// unknownCommand is the usage mistake of word given to the group c.
// A command that names word among its other CLIs' words is the answer;
// edit distance only when none does ("logs" is read or watch, not login).
func unknownCommand(c *cobra.Command, word string) error {
	var named []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() && slices.ContainsFunc(sub.SuggestFor, func(w string) bool { return strings.EqualFold(w, word) }) {
			named = append(named, sub.Name())
		}
	}
	if len(named) == 0 {
		named = c.SuggestionsFor(word)
	}
	return usagef("unknown command %q for %q;%s see `%s --help`", word, c.CommandPath(), didYouMean(named), c.CommandPath())
}

// otherCLIsWords are the verbs kubectl, gh and docker users reach for,
// by the cast command (path without "cast") that does the same; cobra
// suggests it for them, where edit distance finds nothing ("delete" is
// far from "rm").
var otherCLIsWords = map[string][]string{
	"rm":                  {"delete", "remove", "archive", "del"},
	"read":                {"logs", "log", "cat", "show", "history"},
	"watch":               {"logs", "follow", "tail", "attach"},
	"new":                 {"create", "start", "run"},
	"exec":                {"run"},
	"ls":                  {"list", "sessions", "ps"},
	"token rm":            {"delete", "remove", "revoke"},
	"node rm":             {"delete", "remove", "forget"},
	"worktree rm":         {"delete", "remove"},
	"account rm":          {"delete", "remove"},
	"migrate cancel":      {"abort", "rollback", "stop"},
	"config get-contexts": {"view", "contexts", "get-context", "list"},
	"config use-context":  {"use", "switch"},
}

func suggestFor(root *cobra.Command) {
	for _, c := range allCommands(root) {
		c.SuggestFor = append(c.SuggestFor, otherCLIsWords[commandKey(c)]...)
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// resolve is the context and control plane address that --context,
// --addr and the environment name (client.Resolve).
func (a *app) resolve() (client.Context, error) {
	return client.Resolve(os.Getenv, a.context, a.addr)
}

// client dials lazily so --help never needs a control plane.
func (a *app) client() (*client.Client, error) {
	if a.cli == nil {
		cc, err := a.resolve()
		if err != nil {
			return nil, err
		}
		a.use(cc)
		c, err := cc.Dial()
		if err != nil {
			return nil, err
		}
		a.cli = c
	}
	return a.cli, nil
}

// use makes cc the control plane this run calls: the one explain names
// when nothing answers there. Commands that dial it themselves (node
// join, ca) call it too, so they say it the same way.
func (a *app) use(cc client.Context) {
	a.addrFrom = addrSource(cc, a.addr)
	a.addr, a.cc = cc.Addr, cc
}

// addrSource names where Resolve took cc's address from, addrFlag being
// what --addr said.
func addrSource(cc client.Context, addrFlag string) string {
	switch {
	case cc.ContextName() != "":
		return fmt.Sprintf("context %q", cc.ContextName())
	case addrFlag != "":
		return "--addr"
	case os.Getenv("CAST_ADDR") != "":
		return "CAST_ADDR"
	}
	return "the default address"
}

// unreachable says that the control plane use chose does not answer, and
// what to do about it.
func (a *app) unreachable() string {
	if msg := a.trustProblem(); msg != "" {
		return msg
	}
	if a.cc.Loopback() {
		return fmt.Sprintf("cannot reach the control plane at %s; start it with `controlplane --dev`, or point --addr / CAST_ADDR at it", a.addr)
	}
	// Another machine's control plane is not started from here.
	return fmt.Sprintf("cannot reach the control plane at %s (%s): check that it runs and that this machine can reach it, or choose another with --context / --addr / CAST_ADDR", a.addr, a.addrFrom)
}

func (a *app) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, a.timeout)
}

// call runs fn with a client and the request deadline: the preamble of
// every one-shot command.
func (a *app) call(cmd *cobra.Command, fn func(context.Context, *client.Client) error) error {
	return a.callIn(cmd.Context(), fn)
}

// callIn is call under parent: one call a longer step makes (the
// deadline ends with fn, not with the step).
func (a *app) callIn(parent context.Context, fn func(context.Context, *client.Client) error) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx(parent)
	defer cancel()
	return fn(ctx, c)
}

// trustProblem is the TLS trust failure behind an unreachable control
// plane, "" when trust is not the cause (client.Context.TrustProblem).
func (a *app) trustProblem() string {
	if a.cli == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(a.timeout, 5*time.Second))
	defer cancel()
	return a.cc.TrustProblem(ctx)
}

// explain turns an RPC error into one line that says what to do.
func (a *app) explain(err error) string {
	var dial *net.OpError
	if errors.As(err, &dial) && dial.Op == "dial" && a.cc.Addr != "" && a.cli == nil {
		// A command that dials the control plane use chose without gRPC
		// (`cast ca` fetching the CA) says it as every other one does.
		// Only that one: `cast login` dials its issuer, never use.
		return a.unreachable()
	}
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	switch st.Code() {
	case codes.Unavailable:
		if client.ReasonOf(err) == "" {
			return a.unreachable()
		}
	case codes.DeadlineExceeded:
		return fmt.Sprintf("the control plane at %s did not answer within %s; retry, or raise --timeout", a.addr, a.timeout)
	}
	return st.Message()
}
