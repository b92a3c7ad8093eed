package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/exportlog"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/msgspool"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/validate"
	"github.com/cast-dev/cast/internal/wire"
)

// Import batches stay well under the control plane's request size.
const (
	importBatchMsgs  = 500
	importBatchBytes = 4 << 20
)

func (a *app) importCmd() *cobra.Command {
	var agent, cwd, node, parent string
	cmd := &cobra.Command{
		Use:   "import --agent A PATH",
		Short: "Bring an existing native session into cast (for OpenCode, PATH is what `opencode export` prints)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if agent == "" {
				return usagef("--agent is required: the agent that wrote PATH")
			}
			f, err := readNative(agent, args[0], cwd)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			reqID := ids.NewClientID()
			sess, err := a.createSession(cmd.Context(), &castv1.CreateSessionRequest{
				Agent: agent, Cwd: f.cwd, Node: node, RequestId: reqID, Title: importTitle(f.msgs, args[0]),
				HistoryMessages: int64(len(f.msgs)), ParentId: parent, ParentCallId: parentCall(parent, f.isSub, f.sub),
			})
			if err != nil {
				return err
			}
			n, err := a.appendAll(cmd.Context(), sess.Id, reqID, agent, f.msgs)
			if err != nil {
				return fmt.Errorf("session %s created but the import stopped after %d of %d messages: %w", sess.Id, n, len(f.msgs), err)
			}
			if f.skipped == nil {
				f.skipped = map[string]int{}
			}
			workers, err := a.importRuns(cmd.Context(), c, sess, f.r, args[0], f.skipped)
			if err != nil {
				return err
			}
			rep := importReport{path: args[0], agent: agent, parent: parent, id: sess.Id, n: n,
				kept: keptKinds(f.msgs), skipped: f.skipped, sub: f.sub, isSub: f.isSub, workers: workers}
			if a.json {
				return a.printJSON(rep.json())
			}
			rep.print(a.out, a.errOut)
			if hint := a.importNoCLIHint(cmd.Context(), c, sess); hint != "" {
				fmt.Fprintln(a.errOut, hint)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "agent that wrote PATH: "+strings.Join(agents.ReadableAgents(), ", "))
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory of the session (default: the one the transcript records, else the current one)")
	cmd.Flags().StringVar(&node, "node", "", "node to own the session (default: a connected node with the agent, else any: an import runs no CLI)")
	cmd.Flags().StringVar(&parent, "parent", "", "import as a nested worker of this cast session (for a file that holds a subagent's run: its parent's)")
	// PATH is import's argument, so the session is a flag; -s/--session is
	// its hidden alias as on every command that takes a session.
	sessionFlag(cmd, &parent)
	return cmd
}

// nativeFile is a native session file read for import: its messages,
// what was skipped, the subagent whose run it holds (isSub), and the
// working directory the session gets.
type nativeFile struct {
	r       agents.Reader
	msgs    []transcript.Message
	skipped map[string]int
	sub     agents.Subagent
	isSub   bool
	cwd     string
}

// readNative reads path as agent's transcript, refused when it holds no
// message, before anything is created.
func readNative(agent, path, cwd string) (nativeFile, error) {
	var f nativeFile
	var err error
	if f.r, err = agents.ReaderFor(agent); err != nil {
		return f, err
	}
	if f.msgs, f.skipped, err = agents.ReadReport(f.r, path); err != nil {
		return f, flagFile("PATH", path, fmt.Errorf("read %s as a %s transcript: %w", path, agent, err))
	}
	if len(f.msgs) == 0 {
		return f, fmt.Errorf("no messages found in %s; is it a %s transcript?", path, agent)
	}
	if f.sub, f.isSub, err = agents.ReadSubagent(f.r, path); err != nil {
		return f, fmt.Errorf("read %s as a %s transcript: %w", path, agent, err)
	}
	f.cwd, err = importCwd(f.r, path, cwd)
	return f, err
}

// importReport is what an import did, for its JSON or its words.
type importReport struct {
	path, agent, parent, id string
	n                       int
	kept, skipped           map[string]int
	sub                     agents.Subagent
	isSub                   bool
	workers                 []importedRun
}

func (r importReport) json() map[string]any {
	rep := map[string]any{"id": r.id, "agent": r.agent, "messages": r.n, "kept": r.kept, "skipped": r.skipped}
	if r.isSub {
		rep["subagent"] = r.sub
	}
	if r.parent != "" {
		rep["parent_id"] = r.parent
	}
	if len(r.workers) > 0 {
		rep["workers"] = r.workers
	}
	return rep
}

// print writes the session id on out and what was imported and skipped on
// errOut.
func (r importReport) print(out, errOut io.Writer) {
	file := filepath.Base(r.path)
	fmt.Fprintln(out, r.id)
	fmt.Fprintf(errOut, "imported %d messages (%s); read them with `cast read %s`\n", r.n, countList(r.kept), r.id)
	if len(r.skipped) > 0 {
		fmt.Fprintf(errOut, "skipped from %s: %s\n", file, countList(r.skipped))
	}
	if r.isSub {
		fmt.Fprintln(errOut, subagentNotice(file, r.agent, r.sub, r.parent))
	}
	for _, w := range r.workers {
		fmt.Fprintln(errOut, w.notice(file, r.id))
	}
}

// subagentNotice tells that file holds only a subagent's run, and what
// became of it: a worker of parent, or (no parent given) a session of its
// own, with how to make it the worker of the session that ran it.
func subagentNotice(file, agent string, sub agents.Subagent, parent string) string {
	about := sub.Kind
	if sub.ParentNativeID != "" {
		about += " of " + agent + " session " + sub.ParentNativeID
	}
	if sub.CallID != "" {
		about += ", started by its tool call " + sub.CallID
	}
	if parent != "" {
		return fmt.Sprintf("%s holds only a subagent's run (%s); imported as a worker of %s", file, about, parent)
	}
	return fmt.Sprintf("%s holds only a subagent's run (%s); imported as a session of its own "+
		"(`cast import --parent SESSION`, SESSION the cast session of its parent, imports it as that session's worker)", file, about)
}

// importCwd is --cwd when given, else the folder the native session ran
// in (where the agent's format records it), else the current directory.
func importCwd(r agents.Reader, path, flag string) (string, error) {
	if flag != "" {
		return absDir(flag)
	}
	if cr, ok := r.(agents.CwdReader); ok {
		dir, err := cr.ReadCwd(path)
		if err != nil {
			return "", fmt.Errorf("read the working directory from %s: %w", path, err)
		}
		if filepath.IsAbs(dir) {
			return filepath.Clean(dir), nil
		}
	}
	return absDir("")
}

// appendAll sends msgs in bounded batches. Client ids derive from the
// import's request id and position, so a retried batch is stored once.
func (a *app) appendAll(parent context.Context, sessionID, reqID, agent string, msgs []transcript.Message) (int, error) {
	c, err := a.client()
	if err != nil {
		return 0, err
	}
	done := 0
	for done < len(msgs) {
		var batch []*castv1.Message
		size := 0
		for i := done; i < len(msgs) && len(batch) < importBatchMsgs; i++ {
			m := msgs[i]
			m.Seq, m.ClientID = 0, fmt.Sprintf("%s.%d", reqID, i)
			if m.Agent == "" {
				m.Agent = agent
			}
			p := wire.ToProto(m)
			sz := len(p.Text) + len(p.ToolCall.GetInput()) + len(p.ToolResult.GetOutput())
			if len(batch) > 0 && size+sz > importBatchBytes {
				break
			}
			batch, size = append(batch, p), size+sz
		}
		err := a.retry(parent, func(ctx context.Context) error {
			_, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sessionID, Messages: batch})
			return err
		})
		if err != nil {
			return done, err
		}
		done += len(batch)
	}
	return done, nil
}

// keptKinds counts the imported messages by kind.
func keptKinds(msgs []transcript.Message) map[string]int {
	out := map[string]int{}
	for _, m := range msgs {
		out[m.Kind.String()]++
	}
	return out
}

// countList renders counts as "3 user, 1 malformed line", largest first.
func countList(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return strings.Join(parts, ", ")
}

func importTitle(msgs []transcript.Message, path string) string {
	for _, m := range msgs {
		if m.Kind == transcript.KindUser && m.Text != "" {
			return validate.TitleFrom(m.Text)
		}
	}
	return "imported " + filepath.Base(path)
}

func (a *app) exportCmd() *cobra.Command {
	var e nativeExport
	cmd := onSession(&cobra.Command{
		Use:   "export ID --agent B --home DIR [--cwd C] [--overwrite]",
		Short: "Write a session as agent B's native transcript, where B finds it when its own folder is DIR",
		Long: "DIR is the agent's own folder: " + agents.HomeHints(agents.WritableAgents()) + "\n" +
			"(an agent that keeps its sessions in a database there gets the session loaded into it).\n\n" +
			"Each export writes a new native session, except that cast rewrites the one it exported last time\n" +
			"into DIR while that file is byte-identical to what cast wrote; --overwrite rewrites it anyway.",
	}, sessionUse{hint: "cast export ID --agent B --home DIR; `cast ls` lists sessions"}, func(cmd *cobra.Command, id string, _ []string) error {
		if e.agent == "" || e.home == "" {
			return usagef("--agent and --home are required")
		}
		sess, msgs, err := a.exportAll(cmd.Context(), id)
		if err != nil {
			return err
		}
		defer msgs.Close()
		if err := agents.CheckTakeover(e.agent, msgs.Len() > 0); err != nil {
			return err
		}
		t, err := e.target(sess)
		if err != nil {
			return err
		}
		out, rewrite, err := e.write(t, msgs)
		if err != nil {
			return err
		}
		how := " (a new session)"
		if rewrite {
			how = " (over the session cast exported there before)"
		}
		return a.printWritten(sess.Id, e.agent, msgs.Len(), out, map[string]any{"rewrote": rewrite}, "wrote", how)
	})

	cmd.Flags().StringVar(&e.agent, "agent", "", "target agent: "+strings.Join(agents.WritableAgents(), ", "))
	cmd.Flags().StringVar(&e.home, "home", "", "the target agent's own folder (see above)")
	cmd.Flags().StringVar(&e.cwd, "cwd", "", "working directory the agent will run in (default: the session's)")
	cmd.Flags().StringVar(&e.model, "model", "", "model to record where the format has one")
	cmd.Flags().BoolVar(&e.overwrite, "overwrite", false, "rewrite the native session exported last time even if it changed since")
	return cmd
}

// nativeExport is export's flags.
type nativeExport struct {
	agent, home, cwd, model string
	overwrite               bool
}

// target is where sess is written: the session's working directory and
// model unless the flags give them (its model only for its own agent,
// whose model names it knows), refused without an absolute directory.
func (e *nativeExport) target(sess *castv1.Session) (agents.Target, error) {
	model := e.model
	if model == "" && sess.Agent == e.agent {
		model = sess.Model
	}
	return writeTarget(sess, e.home, e.cwd, model)
}

// writeTarget is where restore and export write sess: home, the agent's
// own folder, made absolute; cwd, the session's unless given, refused
// unless absolute (the native session records it).
func writeTarget(sess *castv1.Session, home, cwd, model string) (agents.Target, error) {
	cwd = cmp.Or(cwd, sess.Cwd)
	if !filepath.IsAbs(cwd) {
		return agents.Target{}, usagef("the session has no absolute working directory; pass --cwd")
	}
	absHome, err := filepath.Abs(home)
	if err != nil {
		return agents.Target{}, err
	}
	return agents.Target{Home: absHome, Cwd: cwd, SessionID: sess.Id, Model: model}, nil
}

// printWritten ends restore and export: what they wrote, n messages of
// session id as agent's native session out. JSON says so (with more:
// export's rewrote); people get done's line ("restored", "wrote") with
// note after it, the file under it, and how many older messages were
// trimmed to fit the agent's window.
func (a *app) printWritten(id, agent string, n int, out agents.Written, more map[string]any, done, note string) error {
	if a.json {
		v := map[string]any{"id": id, "agent": agent, "native_id": out.NativeID, "path": out.Path, "messages": n, "omitted": out.Omitted}
		maps.Copy(v, more)
		return a.printJSON(v)
	}
	fmt.Fprintf(a.out, "%s %d messages as %s session %s%s\n  %s\n", done, n, agent, out.NativeID, note, out.Path)
	if out.Omitted > 0 {
		fmt.Fprintf(a.out, "  %d older messages were trimmed to fit the window\n", out.Omitted)
		fmt.Fprintln(a.errOut, "the transcript says how to `cast read` them")
	}
	return nil
}

// write writes msgs at t, over the session exported there last time when
// exportNativeID says so (rewrite).
func (e *nativeExport) write(t agents.Target, msgs agents.MessageSource) (out agents.Written, rewrite bool, err error) {
	log, err := loadExportLog()
	if err != nil {
		return agents.Written{}, false, err
	}
	key := exportlog.Key(e.agent, t.Home, t.SessionID)
	out, err = writeNative(e.agent, t, msgs, log, key, func(cur *exportlog.Log) string {
		var id string
		id, rewrite = exportNativeID(cur, key, e.agent, e.overwrite)
		return id
	})
	return out, rewrite, err
}

// writeNative writes msgs as agent's native session under t and notes
// the file in the export log under key (what a later export rewrites, and
// what a node's adoption knows as cast's own). pick, when set, names the
// native id from the log as it is under the lock (whether the last export
// is still as cast left it: checked before the lock, another cast's write
// and the user's resume could come between); nil keeps t.NativeID.
func writeNative(agent string, t agents.Target, msgs agents.MessageSource, log *exportlog.Log, key string, pick func(cur *exportlog.Log) string) (agents.Written, error) {
	w, err := agents.WriterFor(agent, "", nil)
	if err != nil {
		return agents.Written{}, err
	}
	// Written and noted under the log's lock: a node's adoption reads the
	// log under it too, so it never sees this file without its record.
	lk, err := exportlog.Lock(log.Path())
	if err != nil {
		return agents.Written{}, err
	}
	defer lk.Unlock()
	cur, err := exportlog.Load(log.Path()) // as it is now: another cast may have noted a file since
	if err != nil {
		return agents.Written{}, err
	}
	if pick != nil {
		t.NativeID = pick(cur)
	}
	out, err := agents.WriteFrom(w, t, msgs)
	if err != nil {
		return out, fmt.Errorf("write the %s transcript: %w", agent, err)
	}
	if err := cur.Put(key, t.SessionID, out.NativeID, out.Path); err != nil {
		return out, fmt.Errorf("wrote %s session %s (%s) but could not note it: %w", agent, out.NativeID, out.Path, err)
	}
	return out, nil
}

// exportNativeID is the native id an export writes under, and whether that
// rewrites the session exported last time: it does while the file is as
// cast left it, or with --overwrite (no earlier export: under the writer's
// stable id, whatever is there); otherwise a new id, so a file the user resumed and added to,
// or one cast never wrote, is never rewritten.
func exportNativeID(log *exportlog.Log, key, agent string, overwrite bool) (string, bool) {
	rec, same := log.Unchanged(key)
	switch {
	case same || (overwrite && rec.NativeID != ""):
		return rec.NativeID, true
	case overwrite:
		return "", false
	}
	return agents.NewNativeID(agent), false
}

// exportAll reads the whole session at one revision into a spool, a
// private temporary file, as the pages arrive: a session of hundreds of
// MB is never all in memory (issue 27). The caller closes it.
func (a *app) exportAll(parent context.Context, id string) (*castv1.Session, *msgspool.Spool, error) {
	c, err := a.client()
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	stream, err := c.Sessions.ExportSession(ctx, &castv1.ExportSessionRequest{SessionId: id})
	if err != nil {
		return nil, nil, err
	}
	sp, err := msgspool.New("")
	if err != nil {
		return nil, nil, spoolError(err)
	}
	var sess *castv1.Session
	for {
		page, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			sp.Close()
			return nil, nil, err
		}
		if page.Session != nil {
			sess = page.Session
		}
		for _, m := range page.Messages {
			if err := sp.AddProto(m); err != nil {
				sp.Close()
				return nil, nil, spoolError(err)
			}
		}
	}
	if sess == nil {
		sp.Close()
		return nil, nil, fmt.Errorf("export of %s returned no session", id)
	}
	return sess, sp, nil
}

// spoolError says where the export is kept while it is written and what
// to do when that fails (a full or missing temporary folder): nothing in
// the store changed.
func spoolError(err error) error {
	return fmt.Errorf("keep the export in a temporary file in %s (set TMPDIR to a folder with room for the session): %w", os.TempDir(), err)
}
