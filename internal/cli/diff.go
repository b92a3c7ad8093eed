package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/git"
	"github.com/cast-dev/cast/internal/sessiondiff"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/wire"
)

// diffShown caps each list in the human summary; --json lists everything.
const diffShown = 20

type diffFile struct {
	Path     string `json:"path"`
	Status   string `json:"status"`              // git's XY code: "M ", " M", "??", "R ", ...
	OrigPath string `json:"orig_path,omitempty"` // source of a rename or copy
}

type diffCommit struct {
	Hash    string `json:"hash"`
	Subject string `json:"subject"`
	Time    string `json:"time"` // author time, RFC 3339
}

type diffReport struct {
	ID               string                `json:"id"`
	Cwd              string                `json:"cwd"`
	Node             string                `json:"node,omitempty"`
	RepoRoot         string                `json:"repo_root,omitempty"` // files_changed and files_touched inside it are relative to it
	Since            string                `json:"since,omitempty"`     // commits committed from this time on
	FromSeq          int64                 `json:"from_seq"`            // first message counted (a fork's copied history is not)
	FilesChanged     []diffFile            `json:"files_changed"`
	FilesTruncated   bool                  `json:"files_truncated,omitempty"`
	Commits          []diffCommit          `json:"commits"`
	CommitsTruncated bool                  `json:"commits_truncated,omitempty"`
	Tools            []sessiondiff.ToolUse `json:"tools"`
	FilesTouched     []string              `json:"files_touched"`
	Commands         []string              `json:"commands"`
	WorkspaceError   string                `json:"workspace_error"`
}

func (a *app) diffCmd() *cobra.Command {
	cmd := onSession(&cobra.Command{
		Use:   "diff ID",
		Short: "Show what a session did: files changed, commits made, tools used",
		Long: "Show what a session did: the working directory's uncommitted changes and the commits made\n" +
			"since the session started (read from git on this machine), and the tools, files and shell\n" +
			"commands in its transcript. Run it on the session's node to see the workspace part.",
	}, sessionUse{hint: "cast diff ID; `cast ls` lists sessions"}, func(cmd *cobra.Command, id string, _ []string) error {
		sess, from, msgs, err := a.sessionWork(cmd, id)
		if err != nil {
			return err
		}
		rep := diffOf(cmd.Context(), sess, from, msgs)
		if a.json {
			return a.printJSON(rep)
		}
		return a.printDiff(rep)
	})

	return cmd
}

// sessionWork is session id and the messages that were its own work, from
// seq from on: a fork's copied history was the parent's work, not this
// session's.
func (a *app) sessionWork(cmd *cobra.Command, id string) (*castv1.Session, int64, []transcript.Message, error) {
	var c *client.Client
	var sess *castv1.Session
	err := a.call(cmd, func(ctx context.Context, cl *client.Client) (err error) {
		c = cl
		sess, err = cl.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: id})
		return err
	})
	if err != nil {
		return nil, 0, nil, err
	}
	from := int64(1)
	if sess.ParentId != "" && sess.ForkedAtSeq > 0 {
		from = sess.ForkedAtSeq + 1
	}
	var msgs []transcript.Message
	if from <= sess.LastSeq {
		err := c.EachMessage(cmd.Context(), a.timeout, &castv1.ListMessagesRequest{SessionId: id, StartSeq: from}, func(m *castv1.Message) error {
			msgs = append(msgs, wire.FromProto(m))
			return nil
		})
		if err != nil {
			return nil, 0, nil, err
		}
	}
	return sess, from, msgs, nil
}

// diffOf is what sess did: its workspace as git on this machine sees it
// (or why not), and the tools, files and commands in msgs. Every list is
// [] rather than null when empty, for scripts.
func diffOf(ctx context.Context, sess *castv1.Session, from int64, msgs []transcript.Message) diffReport {
	rep := diffReport{
		ID: sess.Id, Cwd: sess.Cwd, Node: sess.Node, FromSeq: from,
		FilesChanged: []diffFile{}, Commits: []diffCommit{}, Tools: []sessiondiff.ToolUse{},
		FilesTouched: []string{}, Commands: []string{},
	}
	since := sessionStart(sess, msgs)
	ws, err := git.Inspect(ctx, sess.Cwd, git.Options{Since: since})
	if err != nil {
		rep.WorkspaceError = workspaceProblem(err, sess)
	} else {
		rep.addWorkspace(ws)
	}
	if !since.IsZero() {
		rep.Since = since.UTC().Format(time.RFC3339)
	}
	sum := sessiondiff.Summarize(msgs, "")
	if sum.Tools != nil {
		rep.Tools = sum.Tools
	}
	if sum.Commands != nil {
		rep.Commands = sum.Commands
	}
	rep.FilesTouched = touchedPaths(sum.FilesTouched, sess.Cwd, ws)
	return rep
}

// addWorkspace adds git's uncommitted files and commits.
func (r *diffReport) addWorkspace(ws *git.Report) {
	r.RepoRoot = ws.Root
	for _, f := range ws.Files {
		r.FilesChanged = append(r.FilesChanged, diffFile{Path: f.Path, Status: f.Status(), OrigPath: f.OrigPath})
	}
	for _, cm := range ws.Commits {
		r.Commits = append(r.Commits, diffCommit{Hash: cm.Hash, Subject: cm.Subject, Time: cm.AuthorTime.UTC().Format(time.RFC3339)})
	}
	r.FilesTruncated, r.CommitsTruncated = ws.FilesTruncated, ws.CommitsTruncated
}

// sessionStart is when the session began: its create time, or for an
// import the time of its first message if that is earlier.
func sessionStart(sess *castv1.Session, msgs []transcript.Message) time.Time {
	var start time.Time
	if sess.CreateTime != nil {
		start = sess.CreateTime.AsTime()
	}
	if sess.ParentId == "" {
		for _, m := range msgs {
			if !m.Time.IsZero() && m.IsContent() {
				if start.IsZero() || m.Time.Before(start) {
					start = m.Time
				}
				break
			}
		}
	}
	return start
}

// workspaceProblem says in one line why the workspace part is missing and
// what to do about it.
func workspaceProblem(err error, sess *castv1.Session) string {
	var we *git.Error
	if !errors.As(err, &we) {
		return err.Error()
	}
	switch we.Kind {
	case git.KindInvalid:
		if sess.Cwd == "" {
			return "the session has no working directory; only its transcript is summarized"
		}
	case git.KindNotFound:
		where := "its node"
		if sess.Node != "" {
			where = "node " + sess.Node
		}
		return fmt.Sprintf("%s does not exist on this machine; run `cast diff %s` on %s to see files and commits", sess.Cwd, sess.Id, where)
	case git.KindNotRepo:
		return fmt.Sprintf("%s is not in a git repository, so there are no files or commits to show", sess.Cwd)
	case git.KindNoGit:
		return "git is not installed here; install it to see files and commits"
	}
	return we.Error()
}

// touchedPaths puts the files named by tool calls on the same footing as
// git's: relative to the repository root when inside it (else to the
// working directory), absolute otherwise, each once.
func touchedPaths(files []string, cwd string, ws *git.Report) []string {
	base, realCwd := cwd, cwd
	if ws != nil {
		base, realCwd = ws.Root, ws.Dir
	}
	out := []string{}
	seen := map[string]bool{}
	for _, p := range files {
		switch {
		case !filepath.IsAbs(p) && realCwd != "":
			p = filepath.Join(realCwd, p)
		case filepath.IsAbs(p) && cwd != "" && realCwd != cwd:
			// The agent saw the cwd through a symlink; git reports real paths.
			if r, ok := pathInside(cwd, p); ok {
				p = filepath.Join(realCwd, r)
			}
		}
		if base != "" {
			if r, ok := pathInside(base, p); ok {
				p = r
			}
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// pathInside returns p relative to dir when p is dir or below it.
func pathInside(dir, p string) (string, bool) {
	if !filepath.IsAbs(p) {
		return "", false
	}
	r, err := filepath.Rel(dir, p)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", false
	}
	return r, true
}

func (a *app) printDiff(r diffReport) error {
	w := a.out
	head := "Session " + r.ID
	if r.Cwd != "" {
		head += " in " + r.Cwd
	}
	if r.Node != "" {
		head += " (node " + r.Node + ")"
	}
	fmt.Fprintln(w, head)
	if r.FromSeq > 1 {
		fmt.Fprintf(w, "Counting from #%d: earlier messages were copied from the session it was forked from.\n", r.FromSeq)
	}
	if r.WorkspaceError != "" {
		fmt.Fprintln(w, "Workspace: "+r.WorkspaceError)
	} else {
		a.printWorkspace(r)
	}
	if err := a.printTools(r); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nFiles touched by tools (%d):\n", len(r.FilesTouched))
	a.printList(r.FilesTouched, r.ID, false)
	fmt.Fprintf(w, "\nCommands run (%d):\n", len(r.Commands))
	cmds := make([]string, 0, len(r.Commands))
	for _, c := range r.Commands {
		cmds = append(cmds, commandLine(c))
	}
	a.printList(cmds, r.ID, false)
	fmt.Fprintf(a.errOut, "read the whole conversation with `cast read %s`\n", r.ID) // a hint: stderr
	return nil
}

// printWorkspace prints the files changed and the commits made.
func (a *app) printWorkspace(r diffReport) {
	fmt.Fprintf(a.out, "\nFiles changed (%d, not committed; paths relative to %s):\n", len(r.FilesChanged), r.RepoRoot)
	lines := make([]string, 0, len(r.FilesChanged))
	for _, f := range r.FilesChanged {
		l := f.Status + " " + f.Path
		if f.OrigPath != "" {
			l += " (from " + f.OrigPath + ")"
		}
		lines = append(lines, l)
	}
	a.printList(lines, r.ID, r.FilesTruncated)
	since := ""
	if t, err := time.Parse(time.RFC3339, r.Since); err == nil {
		since = " since " + t.Local().Format("2006-01-02 15:04")
	}
	fmt.Fprintf(a.out, "\nCommits (%d%s):\n", len(r.Commits), since)
	lines = lines[:0]
	for _, cm := range r.Commits {
		when := ""
		if t, err := time.Parse(time.RFC3339, cm.Time); err == nil {
			when = "  (" + ago(timestamppb.New(t)) + ")"
		}
		lines = append(lines, commitShort(cm.Hash)+"  "+cm.Subject+when)
	}
	a.printList(lines, r.ID, r.CommitsTruncated)
}

// printTools prints each tool with its count of calls, in a table.
func (a *app) printTools(r diffReport) error {
	calls := 0
	for _, t := range r.Tools {
		calls += t.Count
	}
	fmt.Fprintf(a.out, "\nTools used (%d calls):\n", calls)
	if len(r.Tools) == 0 {
		fmt.Fprintln(a.out, "  none")
		return nil
	}
	tw := newTable(a.out)
	for i, t := range r.Tools {
		if i == diffShown {
			fmt.Fprintf(tw, "  … %d more tools; `cast diff %s --json` lists all\n", len(r.Tools)-diffShown, r.ID)
			break
		}
		fmt.Fprintf(tw, "  %s\t%d\n", t.Name, t.Count)
	}
	return tw.Flush()
}

// printList prints up to diffShown indented lines, or "none".
func (a *app) printList(lines []string, id string, truncated bool) {
	if len(lines) == 0 {
		fmt.Fprintln(a.out, "  none")
		return
	}
	for i, l := range lines {
		if i == diffShown {
			fmt.Fprintf(a.out, "  … %d more\n", len(lines)-diffShown)
			fmt.Fprintf(a.errOut, "`cast diff %s -o json` lists all %d\n", id, len(lines))
			break
		}
		fmt.Fprintln(a.out, "  "+l)
	}
	if truncated {
		fmt.Fprintln(a.out, "  (more than cast reads; see git for the rest)")
	}
}

func commitShort(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}

// commandLine shows a multi-line command by its first line.
func commandLine(s string) string {
	first, rest, found := strings.Cut(s, "\n")
	if r := []rune(first); len(r) > 100 {
		first = string(r[:100]) + "…"
	} else if found && strings.TrimSpace(rest) != "" {
		first += " …"
	}
	return first
}
