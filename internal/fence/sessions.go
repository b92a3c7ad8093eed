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

// ForkCopied refuses a message to fork s holding count messages (its seq
// key: the stored record does not keep last_seq) while its copy of its
// parent's history stopped part way (its control plane stopped, or the
// store refused a batch; the fork's error named it): the message would be
// stored within the fork's history mark (history_seq), where the node
// counts it as history and never delivers it, and the copy, finished by a
// retried fork, would put the parent's last messages past the mark, as
// prompts of the fork's own. The parent's seqs are dense, so a finished
// copy holds at least history_seq messages, and the count only grows: the
// store checks it with the archive (Guard.Open), in the append's txn. An
// import's history_seq (no forked_at_seq) is not a copy: its importer
// appends the history through the API.
func ForkCopied(s *castv1.Session, count int64) error {
	if s.ForkedAtSeq > 0 && count < s.HistorySeq {
		return errs.New(errs.KindFailedPrecondition, errs.ReasonForkIncomplete,
			"fork %s holds %d of the %d messages it copies from %s: the fork stopped part way; `cast fork %s` again",
			s.Id, count, s.HistorySeq, s.ParentId, s.ParentId).With("session", s.Id)
	}
	return nil
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
