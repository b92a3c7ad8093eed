package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/validate"
)

// Workspaces: the control plane checks and routes; the owner node, which
// holds the checkout, does the git work and answers with ReportWorkspace.

// workspaceTimeout bounds a node's answer (a worktree of a big repository
// takes a while to check out; its setup runs after, in the background).
const workspaceTimeout = 2 * time.Minute

func (h *sessionService) SetWorkspace(ctx context.Context, req *castv1.SetWorkspaceRequest) (*castv1.SetWorkspaceResponse, error) {
	if err := validSessionID(req.SessionId); err != nil {
		return nil, err
	}
	switch t := req.Target.(type) {
	case *castv1.SetWorkspaceRequest_Root:
		if !t.Root {
			return nil, invalid("give one of root, repo or worktree")
		}
	case *castv1.SetWorkspaceRequest_Repo:
		if err := refuse(validate.Need(validate.RepoPath, "repo", t.Repo)); err != nil {
			return nil, err
		}
	case *castv1.SetWorkspaceRequest_Worktree:
		if t.Worktree == nil {
			t.Worktree = &castv1.WorktreeTarget{}
		}
		if err := refuse(
			validate.Check(validate.Branch, "worktree.branch", t.Worktree.Branch),
			validate.Check(validate.Branch, "worktree.base", t.Worktree.Base),
		); err != nil {
			return nil, err
		}
	default:
		return nil, invalid("give one of root, repo or worktree")
	}
	sess, err := h.s.store.GetSession(ctx, req.SessionId)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	if sess.Archived {
		return nil, toStatus(h.s.lg, errs.New(errs.KindFailedPrecondition, errs.ReasonSessionArchived, "session %s is archived", sess.Id))
	}
	op := proto.Clone(req).(*castv1.SetWorkspaceRequest)
	if wt := op.GetWorktree(); wt != nil && wt.Branch == "" {
		wt.Branch = ids.DefaultBranch(sess.Title, sess.Id)
	}
	if _, err := h.s.askNode(ctx, sess.Node, &castv1.WorkspaceRequest{Op: &castv1.WorkspaceRequest_Set{Set: op}}); err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	sess, err = h.s.store.GetSession(ctx, req.SessionId)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.SetWorkspaceResponse{Session: sess}, nil
}

func (h *nodeService) ListWorktrees(ctx context.Context, req *castv1.ListWorktreesRequest) (*castv1.ListWorktreesResponse, error) {
	if err := refuse(validate.Check(validate.Name, "node", req.Node)); err != nil {
		return nil, err
	}
	// Every page asks the nodes again (worktrees live on them, not in the
	// store); the key pages by node, then path.
	key := func(w *castv1.Worktree) string { return w.Node + "\x00" + w.Path }
	page, err := pager(req.PageSize, req.PageToken, "worktrees:"+scope(req.Node), key)
	if err != nil {
		return nil, err // before asking every node
	}
	names := []string{req.Node}
	if req.Node == "" {
		var err error
		if names, err = h.s.connectedNodes(ctx); err != nil {
			return nil, toStatus(h.s.lg, err)
		}
	}
	resp := &castv1.ListWorktreesResponse{}
	for _, n := range names {
		ans, err := h.s.askNode(ctx, n, &castv1.WorkspaceRequest{Op: &castv1.WorkspaceRequest_List{List: &castv1.ListWorktreesRequest{Node: n}}})
		if err != nil {
			if req.Node != "" {
				return nil, toStatus(h.s.lg, err)
			}
			// The field is shown as it is: what toStatus would tell the
			// caller, never a store's or decoder's raw text (it logs that).
			resp.Unanswered = append(resp.Unanswered, n+": "+statusMessage(h.s.lg.With(zap.String("node", n)), err))
			continue
		}
		for _, w := range ans.Worktrees {
			w.Node = n
			if h.s.mayUseWorktree(ctx, w) == nil {
				resp.Worktrees = append(resp.Worktrees, w)
			}
		}
	}
	if resp.Worktrees, resp.NextPageToken, err = page(resp.Worktrees); err != nil {
		return nil, err
	}
	return resp, nil
}

// mayUseWorktree lets admins at every worktree and a user at one whose
// sessions (one at least) are all theirs: removing it moves them. A
// session purged since, which its node has not dropped yet (the release
// has not reached it, or the node was away), is nobody's.
func (s *Server) mayUseWorktree(ctx context.Context, w *castv1.Worktree) error {
	p, ok := authz.FromContext(ctx)
	if ok && p.IsAdmin() {
		return nil
	}
	if !ok {
		return authz.Denied(errs.ReasonPermissionDenied, "%s is not a worktree of your sessions", w.Path)
	}
	yours := 0
	for _, id := range w.Sessions {
		sess, err := s.store.GetSession(ctx, id)
		if e, ok := errs.As(err); ok && e.Kind == errs.KindNotFound {
			continue
		}
		if err != nil {
			return err
		}
		if err := s.maySee(ctx, p, sess); err != nil {
			return authz.Denied(errs.ReasonPermissionDenied, "%s holds sessions that are not yours", w.Path)
		}
		yours++
	}
	if yours == 0 {
		return authz.Denied(errs.ReasonPermissionDenied, "%s is not a worktree of your sessions", w.Path)
	}
	return nil
}

// checkRemoveWorktree refuses a user a worktree that is not theirs
// (mayUseWorktree), asking the node what is in it first.
func (s *Server) checkRemoveWorktree(ctx context.Context, node, path string) error {
	if p, ok := authz.FromContext(ctx); ok && p.IsAdmin() {
		return nil
	}
	ans, err := s.askNode(ctx, node, &castv1.WorkspaceRequest{Op: &castv1.WorkspaceRequest_List{List: &castv1.ListWorktreesRequest{Node: node}}})
	if err != nil {
		return err
	}
	for _, w := range ans.Worktrees {
		if w.Path == path {
			return s.mayUseWorktree(ctx, w)
		}
	}
	return nil // the node refuses an unknown path itself
}

func (h *nodeService) RemoveWorktree(ctx context.Context, req *castv1.RemoveWorktreeRequest) (*castv1.RemoveWorktreeResponse, error) {
	if err := refuse(
		validate.Check(validate.Name, "node", req.Node),
		validate.Need(validate.Cwd, "path", req.Path),
	); err != nil {
		return nil, err
	}
	node := req.Node
	if node == "" {
		up, err := h.s.connectedNodes(ctx)
		if err != nil {
			return nil, toStatus(h.s.lg, err)
		}
		if len(up) != 1 {
			return nil, invalid("%d nodes are connected (%s): name the worktree's node with --node", len(up), strings.Join(up, ", "))
		}
		node = up[0]
	}
	if err := h.s.checkRemoveWorktree(ctx, node, filepath.Clean(req.Path)); err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	op := proto.Clone(req).(*castv1.RemoveWorktreeRequest)
	op.Node = node
	ans, err := h.s.askNode(ctx, node, &castv1.WorkspaceRequest{Op: &castv1.WorkspaceRequest_Remove{Remove: op}})
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	resp := &castv1.RemoveWorktreeResponse{}
	if len(ans.Worktrees) > 0 {
		// The node moved the sessions that were in it back (each with its
		// own fenced report) before it removed it.
		resp.Worktree, resp.MovedSessions = ans.Worktrees[0], ans.Worktrees[0].Sessions
		resp.Worktree.Node = node
	}
	return resp, nil
}

// connectedNodes names the nodes connected now.
func (s *Server) connectedNodes(ctx context.Context) ([]string, error) {
	nodes, err := s.store.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	var up []string
	for _, n := range nodes {
		if n.Connected {
			up = append(up, n.Name)
		}
	}
	return up, nil
}

// askNode sends req to node and waits for its answer; a refusal comes
// back as the typed error the node named.
func (s *Server) askNode(ctx context.Context, node string, req *castv1.WorkspaceRequest) (*castv1.ReportWorkspaceRequest, error) {
	return s.askNodeWithin(ctx, node, req, workspaceTimeout)
}

// askNodeWithin is askNode waiting at most wait for the answer.
func (s *Server) askNodeWithin(ctx context.Context, node string, req *castv1.WorkspaceRequest, wait time.Duration) (*castv1.ReportWorkspaceRequest, error) {
	if up, err := s.store.NodeConnected(ctx, node); err != nil {
		return nil, err
	} else if !up {
		return nil, errs.New(errs.KindFailedPrecondition, errs.ReasonNodeNotConn,
			"node %s is not connected; its worktrees are on it, so start it first (`cast nodes`)", node)
	}
	req.RequestId = ids.NewClientID()
	asked := time.Now()
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := s.store.SendNodeCommand(wctx, node, &castv1.Command{Id: req.RequestId, Kind: &castv1.Command_Workspace{Workspace: req}}); err != nil {
		return nil, err
	}
	raw, err := s.store.WaitWorkspaceAnswer(wctx, node, req.RequestId)
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			// The caller's deadline came before our wait ended: saying
			// the node took all of wait would be untrue.
			return nil, errs.New(errs.KindUnavailable, errs.ReasonUnavailable,
				"node %s had not answered when the request's deadline ran out, %s after it was asked (a node is given up to %s)",
				node, time.Since(asked).Round(10*time.Millisecond), wait)
		case ctx.Err() != nil:
			return nil, ctx.Err() // the caller went away
		case errors.Is(wctx.Err(), context.DeadlineExceeded):
			return nil, errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "node %s did not answer within %s", node, wait)
		}
		return nil, err
	}
	ans := &castv1.ReportWorkspaceRequest{}
	if err := proto.Unmarshal(raw, ans); err != nil {
		return nil, errs.Internal(err, "decode a node's workspace answer")
	}
	if ans.Error != "" {
		return nil, nodeRefusal(node, ans.Reason, ans.Error)
	}
	return ans, nil
}

// nodeReasons are the refusals a node may name, with their kind; any
// other is WORKSPACE_FAILED.
var nodeReasons = map[string]errs.Kind{
	errs.ReasonInvalidArgument: errs.KindInvalid,
	errs.ReasonNotFound:        errs.KindNotFound,
	errs.ReasonSessionBusy:     errs.KindFailedPrecondition,
	errs.ReasonWorktreeBusy:    errs.KindFailedPrecondition,
	errs.ReasonWorktreeDirty:   errs.KindFailedPrecondition,
	errs.ReasonWorktreeUnknown: errs.KindNotFound,
	errs.ReasonSessionFenced:   errs.KindFailedPrecondition,
	errs.ReasonNotOwner:        errs.KindFailedPrecondition,
}

func nodeRefusal(node, reason, msg string) error {
	kind, ok := nodeReasons[reason]
	if !ok {
		kind, reason = errs.KindFailedPrecondition, errs.ReasonWorkspaceFailed
	}
	return errs.New(kind, reason, "node %s: %s", node, msg)
}

// ReportWorkspace applies a node's moves (each fenced by its owner token,
// each with its notice) and stores its answer for the replica that asked.
func (h *nodeService) ReportWorkspace(ctx context.Context, req *castv1.ReportWorkspaceRequest) (*castv1.ReportWorkspaceResponse, error) {
	if err := validWorkspaceReport(req); err != nil {
		return nil, err
	}
	for _, m := range req.Moves {
		if err := h.s.applyMove(ctx, req.Node, m); err != nil {
			return nil, toStatus(h.s.lg, err)
		}
	}
	if req.RequestId == "" {
		return &castv1.ReportWorkspaceResponse{}, nil
	}
	raw, err := proto.Marshal(req)
	if err != nil {
		return nil, toStatus(h.s.lg, errs.Internal(err, "encode a workspace answer"))
	}
	if err := h.s.store.PutWorkspaceAnswer(ctx, req.Node, req.RequestId, raw); err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.ReportWorkspaceResponse{}, nil
}

// applyMove records a session's new folder, then its notice (a retried
// report stores the notice once: its client id names the move).
func (s *Server) applyMove(ctx context.Context, node string, m *castv1.WorkspaceMove) error {
	sess, err := s.store.SetWorkspace(ctx, m.SessionId, fence.Guard{Node: node, Token: m.OwnerToken},
		store.Workspace{Cwd: m.Cwd, WorktreeBranch: m.WorktreeBranch, Checkout: m.Checkout})
	if err != nil {
		return err
	}
	if m.Notice == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(m.Cwd + "\x00" + m.Notice))
	cid := fmt.Sprintf("workspace.%d.%s", m.OwnerToken, hex.EncodeToString(sum[:8]))
	msg := &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE, NoticeType: transcript.NoticeWorkspace,
		Text: m.Notice, Agent: sess.Agent, ClientId: cid}
	if _, err := s.store.Append(ctx, m.SessionId, []*castv1.Message{msg}, fence.Guard{Node: node, Token: m.OwnerToken}); err != nil {
		s.lg.Warn("workspace notice not stored", zap.String("session", m.SessionId), zap.Error(err))
		return err
	}
	return nil
}

func validWorkspaceReport(req *castv1.ReportWorkspaceRequest) error {
	checks := []error{
		validate.Need(validate.Name, "node", req.Node),
		validate.Check(validate.ClientID, "request_id", req.RequestId),
		validate.Check(validate.Reason, "error", req.Error),
		validate.Check(validate.Name, "reason", strings.ToLower(req.Reason)),
		validate.Check(validate.Cwd, "folder", req.Folder),
	}
	if len(req.Moves) > 1000 || len(req.Worktrees) > 10000 {
		return invalid("a workspace report holds at most 1000 moves and 10000 worktrees")
	}
	for i, m := range req.Moves {
		f := elemField("moves", i)
		checks = append(checks,
			validate.Need(validate.SessionID, f("session_id"), m.SessionId),
			validate.Need(validate.Cwd, f("cwd"), m.Cwd),
			validate.Check(validate.Branch, f("worktree_branch"), m.WorktreeBranch),
			validate.Check(validate.Cwd, f("checkout"), m.Checkout),
			validate.Check(validate.Reason, f("notice"), m.Notice))
		if m.OwnerToken <= 0 {
			return invalid("%s is required", f("owner_token"))
		}
	}
	for i, w := range req.Worktrees {
		f := elemField("worktrees", i)
		checks = append(checks,
			validate.Need(validate.Cwd, f("path"), w.Path),
			validate.Check(validate.Ident, f("branch"), w.Branch),
			validate.Check(validate.Cwd, f("checkout"), w.Checkout),
			validate.Each(validate.SessionID, f("sessions"), w.Sessions, 10000))
	}
	if err := refuse(checks...); err != nil {
		return err
	}
	return validAgents(req.Agents)
}
