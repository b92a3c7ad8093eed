package fence

import (
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Archived is the refusal of a message to archived session id: the one
// text of the store's check (Guard.Open) and of the cores' own.
func Archived(id string) *errs.Error {
	return errs.New(errs.KindFailedPrecondition, errs.ReasonSessionArchived,
		"session %s is archived and takes no new messages; `cast fork %s` continues it in a new session", id, id).With("session", id)
}

// CreateParams describes a new session.
type CreateParams struct {
	Agent, Model, Cwd, Title string
	// Node is the owner; it must be connected at commit. "" stores the
	// session unowned, only while no node is connected at all (an import,
	// which runs nothing): the first node to connect adopts it.
	Node                    string
	RequestID               string // optional RequestKey; a retry by its sender returns the same session
	ParentID, RootID        string
	ForkedAtSeq, HistorySeq int64
	Effort, HandoffFrom     string
	Account                 string // named credential set on the node
	WorktreeBranch          string // the owner runs it in a git worktree on this branch
	// DefaultWorktree, without WorktreeBranch, names the branch from the
	// title and the new id (ids.DefaultBranch).
	DefaultWorktree bool
	Subagent        bool
	ParentCallID    string // the parent's tool call that started a worker's run
	Creator         string // principal that may see it ("user:alice")
	// Origin is where an adopted session's native transcript was (nil
	// for sessions cast started or imported).
	Origin *castv1.SessionOrigin
}

// Created is a new (or, for a retried request id, existing) session.
type Created struct {
	Session *castv1.Session
	Token   int64 // the owner's fencing token
	Existed bool  // true when request_id matched an earlier create
}

// RequestKey is the idempotency key of request id sent by principal by
// ("role:name"); "" when id is "".
func RequestKey(by, id string) string {
	if id == "" {
		return ""
	}
	return by + "/" + id
}
