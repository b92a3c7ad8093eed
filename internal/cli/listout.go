package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/cast-dev/cast/internal/client"
)

// outputFormats are the values -o takes on every list command (kubectl's
// names); no -o is the table.
var outputFormats = []string{"json", "yaml", "wide", "name"}

// listFlags are -o and --no-headers. Every list command binds them and
// prints through printList, so the formats mean the same everywhere.
type listFlags struct {
	output    string
	noHeaders bool
}

// bind adds the flags to cmd and checks them before cmd runs, so a wrong
// value is a usage mistake (exit 2) even with no control plane.
func (f *listFlags) bind(cmd *cobra.Command, a *app) {
	bindOutput(cmd, &f.output, outputFormats, "a table", func() error {
		_, err := f.format(a.json)
		return err
	})
	cmd.Flags().BoolVar(&f.noHeaders, "no-headers", false, "print the table's rows without its header (for scripts)")
}

// bindOutput adds -o, one of formats (def says what none is), to cmd,
// and check before cmd runs, so a wrong value is a usage mistake (exit
// 2) even with no control plane.
func bindOutput(cmd *cobra.Command, output *string, formats []string, def string, check func() error) {
	cmd.Flags().StringVarP(output, "output", "o", "", "output format: "+strings.Join(formats, "|")+" (default: "+def+")")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
	own := cmd.PreRunE // a command's own checks (account policy's POLICY) still run
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if err := check(); err != nil {
			return err
		}
		if own != nil {
			return own(c, args)
		}
		return nil
	}
}

// dataFormats are the values -o takes on a command that prints data
// neither a list nor one API object (`cast version`, `cast usage`, `cast
// token whoami`): what --json prints, as JSON or YAML (kubectl version's).
var dataFormats = []string{"json", "yaml"}

// printsNoData are the commands with nothing for a script to read in
// another format, by path without "cast": bindDataOutput gives every
// other command -o json|yaml.
var printsNoData = map[string]string{
	"ca":                    "prints the CA certificate, a PEM file",
	"mcp":                   "serves MCP on stdio",
	"mcp call":              "prints the tool's text, as an agent gets it",
	"completion bash":       "prints a shell script",
	"completion fish":       "prints a shell script",
	"completion powershell": "prints a shell script",
	"completion zsh":        "prints a shell script",
}

// bindDataOutput gives every command under root that runs (not a group
// alone) -o json|yaml, but those with their own -o (lists, one object)
// and printsNoData: --json is every command's, and -o json is kubectl's
// word for it. Under -o the command prints as under --json (a.json),
// as YAML for yaml (a.yaml, printJSON).
func (a *app) bindDataOutput(root *cobra.Command) {
	for _, c := range allCommands(root) {
		if _, none := printsNoData[strings.TrimPrefix(c.CommandPath(), root.Name()+" ")]; none || !c.Runnable() || c.Flags().Lookup("output") != nil {
			continue
		}
		bindOutput(c, &a.output, dataFormats, "text for people", func() error {
			format, err := outputFormat(a.output, dataFormats, a.json, " here")
			a.json, a.yaml = format != "", format == "yaml"
			return err
		})
	}
}

// outputFormat is the format -o output (one of formats) and --json ask
// for, "" for neither; where ends the refusal of another -o.
func outputFormat(output string, formats []string, jsonFlag bool, where string) (string, error) {
	switch {
	case output != "" && !slices.Contains(formats, output):
		return "", usagef("-o %q is not an output format%s; use one of %s", output, where, strings.Join(formats, ", "))
	case jsonFlag && output != "" && output != "json":
		return "", usagef("--json and -o %s ask for two formats; give one", output)
	case jsonFlag:
		return "json", nil
	}
	return output, nil
}

// listCmd makes cmd a list command answered by one call to the control
// plane: it binds -o and --no-headers and prints what list returns.
func listCmd[T proto.Message](a *app, cmd *cobra.Command, list func(context.Context, *client.Client) (listing[T], error)) *cobra.Command {
	return objectsCmd(a, cmd, func(ctx context.Context, c *client.Client) (listing[T], any, error) {
		l, err := list(ctx, c)
		return l, raws(l.items), err
	})
}

// objectsCmd is listCmd for a list whose rows are not the API objects it
// got (`cast agents` pivots its checks to a row per agent version): list
// returns the rows, and what json and yaml print instead (printObjects).
func objectsCmd[T any](a *app, cmd *cobra.Command, list func(context.Context, *client.Client) (listing[T], any, error)) *cobra.Command {
	var out listFlags
	a.calling(cmd, func(ctx context.Context, c *client.Client, _ []string) error {
		l, objects, err := list(ctx, c)
		if err != nil {
			return err
		}
		return printObjects(a, out, l, objects)
	})
	out.bind(cmd, a)
	return cmd
}

// format is the chosen format: "table" without -o; --json is -o json.
func (f listFlags) format(jsonFlag bool) (string, error) {
	format, err := outputFormat(f.output, outputFormats, jsonFlag, "")
	if format == "" && err == nil {
		format = "table"
	}
	return format, err
}

// printData prints v as JSON or YAML (format "json" or "yaml").
func (a *app) printData(format string, v any) error {
	if format == "json" {
		return a.printJSON(v)
	}
	y, err := yaml.Marshal(v) // through encoding/json, so YAML has JSON's names
	if err != nil {
		return err
	}
	_, err = a.out.Write(y)
	return err
}

// objectFormats are the values -o takes on a command that shows one
// object (`cast get`): the list formats but wide, which adds columns to
// a table one object has none of.
var objectFormats = []string{"json", "yaml", "name"}

// objectOutput is -o of a command that shows one object.
type objectOutput struct{ output string }

// bind adds -o to cmd, checked before cmd runs, as a list command's is.
func (o *objectOutput) bind(cmd *cobra.Command, a *app) {
	bindOutput(cmd, &o.output, objectFormats, "the fields for people", func() error {
		_, err := o.format(a.json)
		return err
	})
}

// format is the chosen format, "" for the view for people; --json is -o json.
func (o objectOutput) format(jsonFlag bool) (string, error) {
	return outputFormat(o.output, objectFormats, jsonFlag, " here")
}

// print prints m as o asks: the API object as JSON or YAML, its name, or
// what human writes for people.
func (o objectOutput) print(a *app, m proto.Message, name string, human func() error) error {
	format, err := o.format(a.json)
	if err != nil {
		return err
	}
	switch format {
	case "json", "yaml":
		return a.printData(format, raw(m))
	case "name":
		_, err := fmt.Fprintln(a.out, name)
		return err
	}
	return human()
}

// newTable is the layout of every table the CLI prints (lists, `cast
// get`, migrations, CA status, agent checks, usage): columns two spaces
// apart, so all tables line up the same way.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// column is one column of a list's table.
type column[T any] struct {
	header string
	wide   bool // shown with -o wide only
	cell   func(T) string
}

// listing is what one list command shows.
type listing[T any] struct {
	key     string         // the items' field in JSON and YAML ("sessions")
	items   []T            // in the order to print
	extra   map[string]any // more top-level JSON fields (worktree ls: unanswered)
	name    func(T) string // the id or name -o name prints: what a command takes as its argument
	columns []column[T]
	empty   string       // said on stderr over an empty table (its header alone)
	after   func() error // more for people after the table (not with --no-headers)
}

// printList prints l as f asks: json and yaml are the API objects
// (protojson, snake_case as in the .proto files; YAML from the same JSON),
// name one id per line, table and wide aligned columns.
func printList[T proto.Message](a *app, f listFlags, l listing[T]) error {
	return printObjects(a, f, l, raws(l.items))
}

// printObjects is printList for items that are not API objects (the
// contexts file's): objects is what json and yaml print under l.key.
func printObjects[T any](a *app, f listFlags, l listing[T], objects any) error {
	format, err := f.format(a.json)
	if err != nil {
		return err
	}
	switch format {
	case "json", "yaml":
		v := map[string]any{l.key: objects}
		maps.Copy(v, l.extra)
		return a.printData(format, v)
	case "name":
		// Each name once: rows that are not one object each (`cast
		// agents`' agent versions) may share a name.
		seen := map[string]bool{}
		for _, it := range l.items {
			if n := l.name(it); !seen[n] {
				seen[n] = true
				fmt.Fprintln(a.out, n)
			}
		}
		return nil
	}
	if len(l.items) == 0 && l.empty != "" && !f.noHeaders {
		// For people, on stderr: stdout stays the (empty) table a script
		// parses.
		fmt.Fprintln(a.errOut, l.empty)
	}
	var cols []column[T]
	for _, c := range l.columns {
		if !c.wide || format == "wide" {
			cols = append(cols, c)
		}
	}
	tw := newTable(a.out)
	row := make([]string, len(cols))
	if !f.noHeaders {
		for i, c := range cols {
			row[i] = c.header
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	for _, it := range l.items {
		for i, c := range cols {
			row[i] = a.forScreen(c.cell(it))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if l.after != nil && !f.noHeaders {
		return l.after()
	}
	return nil
}
