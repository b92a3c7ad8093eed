package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/tick"
	"github.com/cast-dev/cast/internal/validate"
)

type migrateFlags struct {
	to, label   string
	wait        time.Duration
	maxParallel int
	skipWT      bool
	cleanSource bool
	detach      bool
}

func (f *migrateFlags) bind(cmd *cobra.Command, toHelp string) {
	fl := cmd.Flags()
	fl.StringVar(&f.to, "to", "", toHelp)
	fl.StringVar(&f.label, "label", "", "only nodes with this label are destinations")
	fl.DurationVar(&f.wait, "wait", 10*time.Minute, "how long a running turn may go on before it is interrupted (its prompt then runs again on the destination)")
	fl.IntVar(&f.maxParallel, "max-parallel", 4, "sessions moved at once")
	fl.BoolVar(&f.skipWT, "skip-worktree", false, "move the conversation only (the checkout is already on the destination)")
	fl.BoolVar(&f.cleanSource, "clean-source", false, "leave each source checkout clean once its session moved: its uncommitted changes go into a stash entry there (without it the source keeps its own copy)")
	fl.BoolVar(&f.detach, "detach", false, "return once started; follow with cast migrate status ID")
}

func (a *app) migrateCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "migrate", Short: "Move live sessions between machines (fenced: nothing is lost, never two owners)"}
	var f migrateFlags
	var from string
	var all bool
	start := &cobra.Command{
		Use:   "start --to NODE|LABEL (SESSION... | --from NODE | --all)",
		Short: "Move sessions to a node (by name or label)",
		Example: "  cast migrate start --to linux 7k2m9qa\n  cast migrate start --to linux --from laptop\n" +
			"  cast migrate start --label gpu --all --max-parallel 8",
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.to == "" && f.label == "" {
				return usagef("name the destination with --to NODE|LABEL (or --label NAME); `cast nodes` lists them")
			}
			picks := 0
			for _, on := range []bool{len(args) > 0, from != "", all} {
				if on {
					picks++
				}
			}
			if picks != 1 {
				return usagef("name the sessions: SESSION ids, --from NODE or --all (exactly one)")
			}
			for _, id := range args {
				if err := checkSessionID(id); err != nil {
					return err
				}
			}
			return a.startMigration(cmd, &castv1.StartMigrationRequest{To: f.to, Label: f.label, SessionIds: args, FromNode: from, All: all}, f)
		},
	}
	f.bind(start, "destination node name or label (e.g. linux)")
	start.Flags().StringVar(&from, "from", "", "move every session this node owns")
	start.Flags().BoolVar(&all, "all", false, "move every session not already on the destination")
	cmd.AddCommand(start, a.migrateStatusCmd(), a.migrateLsCmd(), a.migrateCancelCmd())
	return cmd
}

func (a *app) drainCmd() *cobra.Command {
	var f migrateFlags
	cmd := onNode(&cobra.Command{
		Use:     "drain NODE",
		Short:   "Move every session off a node (to --to, or any other connected node)",
		Example: "  cast drain laptop --to linux",
	}, func(cmd *cobra.Command, node string) error {
		return a.startMigration(cmd, &castv1.StartMigrationRequest{To: f.to, Label: f.label, FromNode: node}, f)
	})
	f.bind(cmd, "destination node name or label (default: any other connected node)")
	return cmd
}

func (a *app) startMigration(cmd *cobra.Command, req *castv1.StartMigrationRequest, f migrateFlags) error {
	if f.maxParallel < 1 {
		return usagef("--max-parallel must be at least 1")
	}
	if f.cleanSource && f.skipWT {
		return usagef("--clean-source needs the work tree to move; it cannot go with --skip-worktree")
	}
	req.Wait, req.MaxParallel, req.SkipWorktree = durationpb.New(f.wait), int32(f.maxParallel), f.skipWT
	req.CleanSource = f.cleanSource
	req.RequestId = ids.NewClientID() // a retried call returns the same migration
	var m *castv1.Migration
	err := a.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
		m, err = c.Migrations.StartMigration(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	if f.detach {
		return a.printMigration(m)
	}
	if !a.json {
		fmt.Fprintf(a.out, "migration %s: %d session(s) to %s\n", m.Id, len(m.Sessions), m.TargetNode)
	}
	m, err = a.followMigration(cmd.Context(), m)
	if err != nil {
		return err
	}
	if err := a.printMigration(m); err != nil {
		return err
	}
	a.sourceCopyNote(m)
	if m.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		return fmt.Errorf("migration %s %s%s; the sessions not moved stay where they were", m.Id, migStateName(m.State), reasonSuffix(m.Reason))
	}
	return nil
}

// followMigration polls until the migration ends, drawing a progress bar
// when stderr is a terminal and one line per session state change
// otherwise. Progress goes to stderr: stdout holds only the result, for
// scripts.
func (a *app) followMigration(ctx context.Context, m *castv1.Migration) (*castv1.Migration, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	var bar *mpb.Bar
	var prog *mpb.Progress
	if isTerminal(a.errOut) && !a.json {
		prog = mpb.NewWithContext(ctx, mpb.WithOutput(a.errOut), mpb.WithWidth(40))
		bar = prog.AddBar(int64(len(m.Sessions)),
			mpb.PrependDecorators(decor.Name("moving "), decor.CountersNoUnit("%d/%d")),
			mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO)))
	}
	seen := map[string]castv1.MigrationState{}
	for i := 0; ; i++ {
		done := 0
		for _, ms := range m.Sessions {
			if isTerminalMigration(ms.State) {
				done++
			}
			if seen[ms.SessionId] != ms.State && bar == nil && !a.json {
				fmt.Fprintf(a.errOut, "  %s: %s%s\n", ms.SessionId, migStateName(ms.State), reasonSuffix(ms.Reason))
			}
			seen[ms.SessionId] = ms.State
		}
		if bar != nil {
			bar.SetCurrent(int64(done))
		}
		if isTerminalMigration(m.State) {
			if bar != nil {
				bar.SetTotal(int64(len(m.Sessions)), true)
				prog.Wait()
			}
			return m, nil
		}
		if !tick.Sleep(ctx, 250*time.Millisecond) {
			return nil, ctx.Err()
		}
		rctx, cancel := a.ctx(ctx)
		next, err := c.Migrations.GetMigration(rctx, &castv1.GetMigrationRequest{Id: m.Id})
		cancel()
		if err != nil {
			return nil, err
		}
		m = next
	}
}

// migStateName is the lower-case state people see ("draining_turn").
func migStateName(s castv1.MigrationState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "MIGRATION_STATE_"))
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return " (" + r + ")"
}

func isTerminalMigration(s castv1.MigrationState) bool {
	return s == castv1.MigrationState_MIGRATION_STATE_SUCCEEDED || s == castv1.MigrationState_MIGRATION_STATE_FAILED ||
		s == castv1.MigrationState_MIGRATION_STATE_CANCELLED || s == castv1.MigrationState_MIGRATION_STATE_HANDED_OFF
}

// printMigration prints the migration with its per-session table.
func (a *app) printMigration(m *castv1.Migration) error {
	if a.json {
		return a.printJSON(raw(m))
	}
	fmt.Fprintf(a.out, "migration %s to %s: %s%s\n", m.Id, m.TargetNode, migStateName(m.State), reasonSuffix(m.Reason))
	tw := newTable(a.out)
	fmt.Fprintln(tw, "SESSION\tFROM\tSTATE\tCWD\tREASON")
	for _, ms := range m.Sessions {
		cwd := ms.DestCwd
		if cwd == "" {
			cwd = ms.SourceCwd
		}
		state := migStateName(ms.State)
		if ms.Interrupted {
			state += " (turn interrupted)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ms.SessionId, ms.SourceNode, state, orDash(cwd), orDash(ms.Reason))
	}
	return tw.Flush()
}

// showMigration prints m, first following it to its end when follow
// (under ctx, the command's: the wait outlives one request's deadline).
func (a *app) showMigration(ctx context.Context, m *castv1.Migration, follow bool) error {
	if follow {
		var err error
		if m, err = a.followMigration(ctx, m); err != nil {
			return err
		}
	}
	return a.printMigration(m)
}

func (a *app) migrateStatusCmd() *cobra.Command {
	var follow bool
	var o objectOutput
	cmd := &cobra.Command{
		Use:   "status [ID] [-o json|yaml|name]",
		Short: "Show a migration (default: the newest) with per-session progress",
		Args:  idArgs(cobra.MaximumNArgs(1), validate.ClientID, "migration id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, _ := o.format(a.json) // checked before the run (bind)
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				var m *castv1.Migration
				var err error
				if len(args) == 1 {
					if m, err = c.Migrations.GetMigration(ctx, &castv1.GetMigrationRequest{Id: args[0]}); err != nil {
						return err
					}
				} else {
					resp, err := c.Migrations.ListMigrations(ctx, &castv1.ListMigrationsRequest{PageSize: 1})
					if err != nil {
						return err
					}
					if len(resp.Migrations) == 0 {
						// Nothing is an answer, as for an empty list (exit
						// 0): an empty object a script reads, no name, or
						// the hint for people on stderr.
						switch format {
						case "json", "yaml":
							return a.printData(format, map[string]any{})
						case "":
							fmt.Fprintln(a.errOut, noMigrations)
						}
						return nil
					}
					m = resp.Migrations[0]
				}
				if follow {
					if m, err = a.followMigration(cmd.Context(), m); err != nil {
						return err
					}
				}
				return o.print(a, m, m.Id, func() error { return a.printMigration(m) })
			})
		},
	}
	o.bind(cmd, a)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow until it ends")
	return cmd
}

// noMigrations is what `cast migrate ls` and `cast migrate status` say for
// people when there is none.
const noMigrations = "no migrations yet; start one with `cast migrate start --to NODE SESSION`"

func (a *app) migrateLsCmd() *cobra.Command {
	return listCmd(a, &cobra.Command{
		Use:   "ls [-o json|yaml|wide|name] [--no-headers]",
		Short: "List migrations, newest first",
		Args:  cobra.NoArgs,
	}, func(ctx context.Context, c *client.Client) (listing[*castv1.Migration], error) {
		list, err := c.AllMigrations(ctx, &castv1.ListMigrationsRequest{})
		return listing[*castv1.Migration]{key: "migrations", items: list,
			empty: noMigrations,
			name:  func(m *castv1.Migration) string { return m.Id },
			columns: []column[*castv1.Migration]{
				{header: "ID", cell: func(m *castv1.Migration) string { return m.Id }},
				{header: "TO", cell: func(m *castv1.Migration) string { return m.TargetNode }},
				{header: "TARGET", wide: true, cell: func(m *castv1.Migration) string { return orDash(m.Target) }},
				{header: "STATE", cell: func(m *castv1.Migration) string { return migStateName(m.State) }},
				{header: "SESSIONS", cell: func(m *castv1.Migration) string { return fmt.Sprint(len(m.Sessions)) }},
				{header: "STARTED", cell: func(m *castv1.Migration) string { return ago(m.CreateTime) }},
				{header: "UPDATED", wide: true, cell: func(m *castv1.Migration) string { return ago(m.UpdateTime) }},
				{header: "REASON", wide: true, cell: func(m *castv1.Migration) string { return orDash(clip(m.Reason, noteWidth)) }},
			}}, err
	})
}

func (a *app) migrateCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Roll back every session of a migration not committed yet (waits for the rollback; --json returns at once)",
		Args:  idArgs(cobra.ExactArgs(1), validate.ClientID, "migration id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				m, err := c.Migrations.CancelMigration(ctx, &castv1.CancelMigrationRequest{Id: args[0]})
				if err != nil {
					return err
				}
				return a.showMigration(cmd.Context(), m, !a.json) // people see the rollback finish
			})
		},
	}
}

// sourceCopyNote says, on stderr, what became of the uncommitted changes
// in each checkout a moved session's work tree left: a copy is still
// there, or it is being stashed clean (--clean-source).
func (a *app) sourceCopyNote(m *castv1.Migration) {
	if a.json || m.SkipWorktree {
		return
	}
	seen := map[string]bool{}
	for _, ms := range m.Sessions {
		where := ms.SourceNode + ":" + ms.SourceCwd
		if ms.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED || ms.SourceCwd == "" || seen[where] {
			continue
		}
		seen[where] = true
		if m.CleanSource {
			fmt.Fprintf(a.errOut, "source %s on %s: left clean once released; its uncommitted changes are in a stash entry there (\"cast: moved to %s by migration %s\"; git stash list)\n",
				ms.SourceCwd, ms.SourceNode, m.TargetNode, m.Id)
		} else {
			fmt.Fprintf(a.errOut, "source %s on %s keeps its own copy of the uncommitted changes (the destination has them too); --clean-source stashes them there instead\n",
				ms.SourceCwd, ms.SourceNode)
		}
	}
}
