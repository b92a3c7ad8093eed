package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/git"
	"github.com/cast-dev/cast/internal/validate"
)

// A thread's workspace is the folder its turns run in: its checkout, a
// repository under it, or a git worktree. Moving a thread resets its
// native sessions, so the next turn rebuilds (or hands off) the
// conversation into a fresh native session in the new folder, through
// the turn's ordinary path. Every client-supplied name and path is checked
// here again (the control plane checked it too) before git sees it.

// commitMoves records moves with the control plane (fenced by the owner
// tokens, each with its notice); the node's own state changes only once
// it succeeds.
type commitMoves func(ctx context.Context, moves []*castv1.WorkspaceMove) error

// workspaceRequest does a WorkspaceRequest and answers it.
func (a *Daemon) workspaceRequest(ctx context.Context, req *castv1.WorkspaceRequest) {
	ans := &castv1.ReportWorkspaceRequest{Node: a.cfg.Name, RequestId: req.RequestId}
	var err error
	switch op := req.Op.(type) {
	case *castv1.WorkspaceRequest_Set:
		err = a.setWorkspace(ctx, op.Set, a.reportMoves)
	case *castv1.WorkspaceRequest_List:
		ans.Worktrees = a.listWorktrees(ctx)
	case *castv1.WorkspaceRequest_Remove:
		var w *castv1.Worktree
		if w, err = a.removeWorktree(ctx, op.Remove.Path, op.Remove.Force, a.reportMoves); w != nil {
			ans.Worktrees = []*castv1.Worktree{w}
		}
	case *castv1.WorkspaceRequest_Find:
		ans.Folder, err = a.findFolder(op.Find.Cwd)
	case *castv1.WorkspaceRequest_Probe:
		ans.Agents = a.probeNow(ctx)
	default:
		err = invalidf("unknown workspace request")
	}
	if err != nil {
		a.lg.Info("workspace request refused", zap.String("request", req.RequestId), zap.Error(err))
		ans.Error, ans.Reason = refusal(err)
	}
	// The control plane waits on this answer: gRPC tries it again through
	// a blip (the client's service config; a repeat only stores it again).
	if _, err := a.cli.Nodes.ReportWorkspace(ctx, ans); err != nil && ctx.Err() == nil {
		a.lg.Warn("workspace answer not delivered", zap.String("request", req.RequestId), zap.Error(err))
	}
}

// refusal is the message and stable reason an answer carries for err: its
// own for a typed error or one the control plane returned (a move it
// refused: NOT_OWNER, SESSION_FENCED), else WORKSPACE_FAILED.
func refusal(err error) (string, string) {
	if e, ok := errs.As(err); ok {
		return clipReason(e.Msg), e.Reason
	}
	if r := client.ReasonOf(err); r != "" {
		return clipReason(status.Convert(err).Message()), r
	}
	return clipReason(err.Error()), errs.ReasonWorkspaceFailed
}

// reportMoves is the commitMoves of a running node.
func (a *Daemon) reportMoves(ctx context.Context, moves []*castv1.WorkspaceMove) error {
	_, err := a.cli.Nodes.ReportWorkspace(ctx, &castv1.ReportWorkspaceRequest{Node: a.cfg.Name, Moves: moves})
	return err
}

// setWorkspace moves one session to the folder op names.
func (a *Daemon) setWorkspace(ctx context.Context, op *castv1.SetWorkspaceRequest, commit commitMoves) error {
	if err := validate.Need(validate.SessionID, "session_id", op.SessionId); err != nil {
		return err
	}
	if err := checkTarget(op); err != nil {
		return err
	}
	id := op.SessionId
	o, ok := a.st.get(id)
	if !ok {
		return errs.NotFound("session %s is not on node %s", id, a.cfg.Name)
	}
	release, ok := a.hold(id)
	if !ok {
		return errs.New(errs.KindFailedPrecondition, errs.ReasonSessionBusy,
			"a turn of session %s is running; wait for it or `cast interrupt %s`, then move it", id, id)
	}
	defer release()
	checkout := a.checkoutOf(ctx, o)
	mv := &castv1.WorkspaceMove{SessionId: id, OwnerToken: o.Token, Checkout: checkout}
	var made bool
	switch t := op.Target.(type) {
	case *castv1.SetWorkspaceRequest_Root:
		mv.Cwd = checkout
		mv.Notice = fmt.Sprintf("This thread now works in its checkout %s.", checkout)
	case *castv1.SetWorkspaceRequest_Repo:
		dir, err := repoUnder(ctx, checkout, t.Repo)
		if err != nil {
			return err
		}
		mv.Cwd = dir
		mv.Notice = fmt.Sprintf("This thread now works in the repository %s (under its checkout %s).", dir, checkout)
	case *castv1.SetWorkspaceRequest_Worktree:
		wt := t.Worktree
		top, err := mainCheckout(ctx, o.Cwd)
		base := wt.Base
		switch {
		case err != nil:
			if top, err = mainCheckout(ctx, checkout); err != nil {
				return invalidf("a worktree needs a git checkout: %s is not in one", checkout)
			}
		case base == "":
			base = threadHead(ctx, o.Cwd) // the thread's HEAD, in a worktree too
		}
		var dir string
		if dir, made, err = a.worktreeFor(ctx, top, wt.Branch, base); err != nil {
			return err
		}
		mv.Cwd, mv.WorktreeBranch = dir, wt.Branch
		mv.Notice = fmt.Sprintf("This thread now works in the git worktree %s on branch %s (of %s).", dir, wt.Branch, top)
		if made {
			mv.Notice = fmt.Sprintf("This thread now works in a new git worktree %s on a new branch %s (of %s, from %s).",
				dir, wt.Branch, top, orHEAD(wt.Base))
		}
	default:
		return invalidf("give one of root, repo or worktree")
	}
	if err := a.moveSessions(ctx, []*castv1.WorkspaceMove{mv}, commit); err != nil {
		return err
	}
	a.lg.Info("session moved", zap.String("session", id), zap.String("cwd", mv.Cwd), zap.String("branch", mv.WorktreeBranch))
	if made {
		a.startSetup(id, mv.Cwd)
	}
	return nil
}

// checkTarget checks the names and paths op carries, before git or the
// file system sees them (the control plane did too; this node does not
// rely on it).
func checkTarget(op *castv1.SetWorkspaceRequest) error {
	switch t := op.Target.(type) {
	case *castv1.SetWorkspaceRequest_Root:
		return nil
	case *castv1.SetWorkspaceRequest_Repo:
		return validate.Need(validate.RepoPath, "repo", t.Repo)
	case *castv1.SetWorkspaceRequest_Worktree:
		if t.Worktree == nil {
			return invalidf("a worktree move names its branch")
		}
		return errors.Join(validate.Need(validate.Branch, "worktree.branch", t.Worktree.Branch),
			validate.Check(validate.Branch, "worktree.base", t.Worktree.Base))
	}
	return invalidf("give one of root, repo or worktree")
}

func orHEAD(ref string) string {
	if ref == "" {
		return "HEAD"
	}
	return ref
}

// checkoutOf is the folder a session's workspaces are taken from: the one
// recorded, else the main checkout of the repository it works in, else
// its cwd.
func (a *Daemon) checkoutOf(ctx context.Context, o owned) string {
	if o.Checkout != "" {
		return o.Checkout
	}
	if top, err := mainCheckout(ctx, o.Cwd); err == nil {
		return top
	}
	return o.Cwd
}

// repoUnder resolves rel, a repository under checkout, to its real path;
// a path that leaves the checkout (by '..' or through a symlink) or that
// is not a repository's top is refused, before git runs in it.
func repoUnder(ctx context.Context, checkout, rel string) (string, error) {
	if err := validate.Need(validate.RepoPath, "repo", rel); err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(checkout)
	if err != nil {
		return "", invalidf("the checkout %s cannot be read: %v", checkout, err)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, rel))
	if err != nil {
		return "", invalidf("%s is not a folder under the checkout %s", rel, checkout)
	}
	if !within(root, real) {
		return "", invalidf("%s leads outside the checkout %s (to %s)", rel, checkout, real)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", invalidf("%s is not a folder under the checkout %s", rel, checkout)
	}
	out, err := git.Run(ctx, real, 0, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", invalidf("%s is not a git repository", rel)
	}
	if top, err := filepath.EvalSymlinks(strings.TrimSpace(string(out))); err != nil || top != real {
		return "", invalidf("%s is not a repository's top folder (its repository is %s)", rel, strings.TrimSpace(string(out)))
	}
	return real, nil
}

// moveSessions gives each session its new folder: a fresh start for its
// agents (no native session), recorded with the control plane first. The
// sessions must be held.
func (a *Daemon) moveSessions(ctx context.Context, moves []*castv1.WorkspaceMove, commit commitMoves) error {
	if err := commit(ctx, moves); err != nil {
		return err
	}
	return a.st.update(func(m map[string]*owned) {
		for _, mv := range moves {
			if o := m[mv.SessionId]; o != nil {
				// The natives of the old folder stay cast's (Former), or
				// adoption takes them for the user's after a restart.
				before := o.natives()
				o.Cwd, o.WorktreeBranch, o.Checkout, o.Native = mv.Cwd, mv.WorktreeBranch, mv.Checkout, nil
				o.keepReplaced(mv.SessionId, before)
			}
		}
	})
}

// movedAway reports whether an assignment puts a session the node knows
// in another folder. A worktree session on the same branch is not moved:
// its stored cwd may still be the checkout its worktree was made from
// (the turn that made it reports it), and the turn finds the worktree.
func movedAway(o owned, s *castv1.Session) bool {
	if o.Cwd == "" || s.Cwd == "" || filepath.Clean(o.Cwd) == filepath.Clean(s.Cwd) {
		return false
	}
	return o.WorktreeBranch == "" || o.WorktreeBranch != s.WorktreeBranch
}

// listWorktrees describes every worktree the node made.
func (a *Daemon) listWorktrees(ctx context.Context) []*castv1.Worktree {
	recs, in := a.st.worktrees()
	slices.SortFunc(recs, func(x, y worktreeRec) int { return strings.Compare(x.Path, y.Path) })
	out := make([]*castv1.Worktree, 0, len(recs))
	for _, r := range recs {
		out = append(out, a.describeWorktree(ctx, r, in[r.Path]))
	}
	return out
}

func (a *Daemon) describeWorktree(ctx context.Context, r worktreeRec, sessions []string) *castv1.Worktree {
	slices.Sort(sessions)
	w := &castv1.Worktree{Node: a.cfg.Name, Path: r.Path, Branch: r.Branch, Checkout: r.Checkout,
		Sessions: sessions, Changes: int32(localChanges(ctx, r.Path))}
	for _, id := range sessions {
		w.AgentRunning = w.AgentRunning || a.workers.running(id)
	}
	return w
}

// localChanges counts modified, staged and untracked files; -1 when git
// cannot tell.
func localChanges(ctx context.Context, dir string) int {
	r, err := git.Open(ctx, dir, 0)
	if err != nil {
		return -1
	}
	files, _, err := r.Status(ctx, 0)
	if err != nil {
		return -1
	}
	return len(files)
}

// removeWorktree removes a worktree the node made, never its branch, and
// moves the sessions in it back to their checkout. Only a path the node
// recorded is accepted, so anything else (the checkout itself, /etc) is
// refused before git runs.
func (a *Daemon) removeWorktree(ctx context.Context, path string, force bool, commit commitMoves) (*castv1.Worktree, error) {
	if err := validate.Need(validate.Cwd, "path", path); err != nil {
		return nil, err
	}
	recs, in := a.st.worktrees()
	i := slices.IndexFunc(recs, func(r worktreeRec) bool { return r.Path == filepath.Clean(path) })
	if i < 0 {
		return nil, errs.New(errs.KindNotFound, errs.ReasonWorktreeUnknown,
			"%s is not a worktree cast made on node %s; `cast worktree ls` lists them", path, a.cfg.Name)
	}
	r := recs[i]
	if filepath.Clean(r.Checkout) == r.Path {
		return nil, invalidf("%s is the checkout itself, not a worktree", path)
	}
	sessions := in[r.Path]
	for _, id := range sessions {
		release, ok := a.hold(id)
		if !ok {
			return nil, errs.New(errs.KindFailedPrecondition, errs.ReasonWorktreeBusy,
				"an agent runs in %s now (session %s); wait for its turn or `cast interrupt %s`", r.Path, id, id)
		}
		defer release()
	}
	desc := a.describeWorktree(ctx, r, sessions)
	_, statErr := os.Stat(r.Path)
	gone := errors.Is(statErr, fs.ErrNotExist)
	switch {
	case gone:
	case desc.Changes < 0 && !force:
		return nil, errs.New(errs.KindFailedPrecondition, errs.ReasonWorktreeDirty,
			"git cannot tell the local changes in %s; --force removes it anyway (branch %s stays)", r.Path, r.Branch)
	case desc.Changes > 0 && !force:
		return nil, errs.New(errs.KindFailedPrecondition, errs.ReasonWorktreeDirty,
			"%s has %d local change(s) (modified, staged or untracked files); commit them, or --force removes them (branch %s and its commits stay)",
			r.Path, desc.Changes, r.Branch)
	}
	moves := make([]*castv1.WorkspaceMove, 0, len(sessions))
	for _, id := range sessions {
		o, _ := a.st.get(id)
		home := r.Checkout
		if o.Checkout != "" {
			home = o.Checkout
		}
		moves = append(moves, &castv1.WorkspaceMove{SessionId: id, OwnerToken: o.Token, Cwd: home, Checkout: home,
			Notice: fmt.Sprintf("The worktree %s was removed; this thread works in its checkout %s again. Branch %s keeps its commits.", r.Path, home, r.Branch)})
	}
	if err := a.moveSessions(ctx, moves, commit); err != nil {
		return nil, err
	}
	args := []string{"worktree", "remove", r.Path}
	if force {
		args = []string{"worktree", "remove", "--force", "--force", r.Path} // twice: a locked one too
	}
	if gone {
		args = []string{"worktree", "prune"}
	}
	if _, err := git.Run(ctx, r.Checkout, 0, nil, args...); err != nil {
		return nil, fmt.Errorf("remove the worktree %s: %w", r.Path, err)
	}
	if err := a.st.dropWorktree(r.Path); err != nil {
		return nil, err
	}
	a.lg.Info("worktree removed", zap.String("path", r.Path), zap.String("branch", r.Branch), zap.Bool("force", force), zap.Int("changes", int(desc.Changes)))
	return desc, nil
}
