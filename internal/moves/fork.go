package moves

import (
	"cmp"
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/transcript"
)

// ForkRequest copies a session into a new one.
type ForkRequest struct {
	SessionID string
	AtSeq     int64 // last seq copied; 0 = tip
	Agent     string
	Model     string
	Node      string // default: the parent's node
	RequestID string
	// WorktreeBranch gives the fork its own git worktree (made by the node
	// from the parent's checkout).
	WorktreeBranch string
	// DefaultWorktree, without WorktreeBranch: a worktree on the default
	// branch name (ids.DefaultBranch).
	DefaultWorktree bool
}

// Fork creates a new conversation with lineage (parent, root, forked_at)
// and copies the parent's messages up to AtSeq into it in bounded batches,
// before the node can run a turn on it (a turn starts only on a new user
// message). The parent keeps running; deleting it never touches forks.
//
// When the version of the agent the node has failed its canary, the fork is
// a handoff from the parent instead (b writes the brief): the new session
// starts from a brief of the whole parent, not a copy up to AtSeq.
func Fork(ctx context.Context, st Store, b Briefer, r ForkRequest) (*castv1.Session, error) {
	parent, err := st.GetSession(ctx, r.SessionID)
	if err != nil {
		return nil, err
	}
	at := r.AtSeq
	if at <= 0 || at > parent.LastSeq {
		if r.AtSeq > parent.LastSeq {
			return nil, errs.Invalid("--at %d is past the session's last message (%d)", r.AtSeq, parent.LastSeq)
		}
		at = parent.LastSeq
	}
	agent, _, err := targetAgent(r.Agent, parent.Agent)
	if err != nil {
		return nil, err
	}
	if err := canTakeOver(agent, at > 0); err != nil {
		return nil, err
	}
	model := modelFor(r.Model, agent, parent)
	node := cmp.Or(r.Node, parent.Node)
	// Refused before anything is stored: the fork's first turn would fail
	// for want of the CLI.
	if err := checkPlacement(ctx, st, node, agent, "", r.RequestID); err != nil {
		return nil, err
	}
	if at > 0 {
		why, err := canaryFailure(ctx, st, node, agent, needFor(true, agent == parent.Agent))
		if err != nil {
			return nil, err
		}
		if why != "" {
			return handoffInstead(ctx, st, b, HandoffRequest{SessionID: parent.Id, ToAgent: agent, Model: model, Node: node,
				RequestID: r.RequestID}, "A fork onto "+agents.DisplayName(agent), why)
		}
	}
	branch := BranchBeside(parent, node, r.WorktreeBranch, r.DefaultWorktree)
	root := parent.RootId
	if root == "" {
		root = parent.Id
	}
	c, err := st.CreateSession(ctx, fence.CreateParams{
		Agent: agent, Model: model, Cwd: parent.Cwd, Node: node, RequestID: r.RequestID,
		Title: "fork of " + parent.Id + ": " + parent.Title, ParentID: parent.Id, RootID: root, ForkedAtSeq: at, HistorySeq: at,
		WorktreeBranch: branch, DefaultWorktree: r.DefaultWorktree, Creator: parent.Creator,
	})
	if err != nil {
		return nil, err
	}
	if c.Existed {
		// A retry: the fork point is the first call's, not the parent's
		// tip now; copying past it would give the fork the parent's later
		// messages, after its history mark, as prompts of its own.
		at = c.Session.ForkedAtSeq
	}
	if err := copyMessages(ctx, st, parent.Id, c.Session.Id, at); err != nil {
		return nil, fmt.Errorf("fork %s created, copying stopped: %w", c.Session.Id, err)
	}
	notice := &castv1.Message{ClientId: "fork." + c.Session.Id + ".notice", Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE,
		NoticeType: transcript.NoticeFork, Agent: agent,
		Text: fmt.Sprintf("Forked from %s at message %d. The original keeps running; this conversation continues separately.", parent.Id, at)}
	if _, err := st.Append(ctx, c.Session.Id, []*castv1.Message{notice}, fence.Guard{}); err != nil {
		return nil, err
	}
	return st.GetSession(ctx, c.Session.Id)
}

// copyMessages copies seqs 1..at. Client ids derive from the fork and the
// source seq, so a retried fork (same request id) copies nothing twice.
func copyMessages(ctx context.Context, st Store, from, to string, at int64) error {
	if at <= 0 {
		return nil // an end of 0 would read to the parent's tip
	}
	tok := ""
	for {
		page, next, err := st.ListMessages(ctx, from, 1, at, ForkBatchMsgs, tok)
		if err != nil {
			return err
		}
		var batch []*castv1.Message
		size := 0
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			_, err := st.Append(ctx, to, batch, fence.Guard{})
			batch, size = nil, 0
			return err
		}
		for _, m := range page {
			cp := proto.Clone(m).(*castv1.Message)
			cp.ClientId = fmt.Sprintf("fork.%s.%d", to, m.Seq)
			sz := proto.Size(cp)
			if size+sz > ForkBatchBytes {
				if err := flush(); err != nil {
					return err
				}
			}
			batch, size = append(batch, cp), size+sz
		}
		if err := flush(); err != nil {
			return err
		}
		if tok = next; tok == "" {
			return nil
		}
	}
}

// BranchBeside is the worktree branch of a session made in parent's folder
// (a fork, or a worker given no cwd) on node: the one asked for, else, on
// the parent's node, the parent's. The parent's stored cwd is the checkout
// its worktree came from until the turn that made the worktree ends (an
// agent spawns workers and forks in that turn); the branch takes the new
// session's node to the worktree git has on it.
func BranchBeside(parent *castv1.Session, node, branch string, defaultWorktree bool) string {
	if branch == "" && !defaultWorktree && node == parent.Node {
		return parent.WorktreeBranch
	}
	return branch
}
