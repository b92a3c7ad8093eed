// Package adoption is the control plane's side of adopting native
// sessions (internal/adopt is the node's): it keeps what a node found in
// an agent's own store as a cast session, made once per origin (node,
// agent, native id) and appended to with each message stored once by its
// client id. It knows nothing of gRPC.
package adoption

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/validate"
)

// Store is what adoption needs of the store.
type Store interface {
	CreateSession(ctx context.Context, p fence.CreateParams) (fence.Created, error)
	GetSession(ctx context.Context, id string) (*castv1.Session, error)
	RequestedSession(ctx context.Context, requestKey string) (string, bool, error)
	Append(ctx context.Context, sessionID string, msgs []*castv1.Message, g fence.Guard) ([]*castv1.Message, error)
}

// Request is one batch a node sends (castv1.AdoptSessionRequest).
type Request struct {
	Node      string // the calling node (checked against its credential)
	Principal string // the caller, as fence.RequestKey wants it
	Origin    *castv1.SessionOrigin
	SessionID string // "" : the session adopted for Origin
	Cwd       string
	Title     string
	History   int64
	// ParentNativeID, on create, is the native session whose subagent's
	// run the file holds: when the same node adopted that session, the
	// new one is its worker (a nested session, as `cast import --parent`
	// makes).
	ParentNativeID string
	// ParentSessionID, on create, is the cast session owned by this node
	// whose native session spawned the run (a turn cast ran): the new
	// session is its worker. It wins over ParentNativeID.
	ParentSessionID string
	// ParentCallID is the parent's tool call that started the run, where
	// the file says; kept on the worker.
	ParentCallID string
	Messages     []*castv1.Message
}

// Keep stores r's messages in the cast session that keeps r.Origin,
// making it on the first call, and returns that session's id with the
// messages as stored.
func Keep(ctx context.Context, st Store, r Request) (string, []*castv1.Message, error) {
	if err := check(r); err != nil {
		return "", nil, err
	}
	id := r.SessionID
	if id == "" {
		p := fence.CreateParams{
			Agent: r.Origin.Agent, Cwd: r.Cwd, Title: r.Title, Node: r.Node, Creator: r.Principal,
			RequestID: fence.RequestKey(r.Principal, originKey(r.Origin)), HistorySeq: r.History,
			Origin: &castv1.SessionOrigin{Node: r.Node, Agent: r.Origin.Agent, NativeId: r.Origin.NativeId, Path: r.Origin.Path},
		}
		if err := underParent(ctx, st, r, &p); err != nil {
			return "", nil, err
		}
		c, err := st.CreateSession(ctx, p)
		if err != nil {
			return "", nil, err
		}
		id = c.Session.Id
	} else if err := mayAppend(ctx, st, r); err != nil {
		return "", nil, err
	}
	if len(r.Messages) == 0 {
		return id, nil, nil
	}
	out, err := st.Append(ctx, id, r.Messages, fence.Guard{})
	if errs.HasReason(err, errs.ReasonClientIDReused) {
		// An adopted message's client id is its content and occurrence, not
		// what a rewrite of the file changes around it (Gemini's resume
		// writes its records again under other ids): a node resending what
		// it kept (its bookkeeping lost, or killed between a batch and its
		// record) sends it with other metadata, and refusing the batch would
		// refuse the file's every later batch too.
		out, err = fence.AppendEach(ctx, st, id, r.Messages, fence.Guard{})
	}
	return id, out, err
}

// check refuses a batch that does not say where it comes from.
func check(r Request) error {
	o := r.Origin
	if o == nil || o.NativeId == "" || !filepath.IsAbs(o.Path) {
		return errs.Invalid("origin needs the agent, the native id and the file's absolute path")
	}
	// The native ids name files on whoever restores the session (`cast
	// restore` writes it back under its id), so one that leaves its folder
	// or reads as a flag is refused before it is stored.
	for _, err := range []error{
		validate.Need(validate.NativeID, "origin.native_id", o.NativeId),
		validate.Check(validate.Cwd, "origin.path", o.Path),
		validate.Check(validate.NativeID, "parent_native_id", r.ParentNativeID),
	} {
		if err != nil {
			return err
		}
	}
	if _, ok := agents.Lookup(o.Agent); !ok {
		return errs.Invalid("unknown agent %q", o.Agent)
	}
	if o.Node != "" && o.Node != r.Node {
		return errs.Invalid("origin node %q is not the calling node %q", o.Node, r.Node)
	}
	if r.SessionID == "" && !filepath.IsAbs(r.Cwd) {
		return errs.Invalid("a new adopted session needs the absolute folder it ran in")
	}
	return nil
}

// mayAppend lets a node add to a session it names when that session is
// the one this native session was adopted as (its origin's native id, on
// any node: a restored file resumed elsewhere) or one the node owns (a
// cast session it restored and the user resumed).
func mayAppend(ctx context.Context, st Store, r Request) error {
	s, err := st.GetSession(ctx, r.SessionID)
	if err != nil {
		return err
	}
	if s.Node == r.Node || (s.Origin != nil && s.Origin.Agent == r.Origin.Agent && s.Origin.NativeId == r.Origin.NativeId) {
		return nil
	}
	return errs.New(errs.KindPermissionDenied, errs.ReasonNodeMismatch,
		"session %s is neither owned by node %s nor adopted from %s session %s", r.SessionID, r.Node, r.Origin.Agent, r.Origin.NativeId)
}

// underParent makes p a worker of its parent: the cast session this node
// owns that r names, else the session adopted for r's parent native
// session when this node adopted it. A parent not adopted (yet, or by
// another node), or one the node no longer owns, leaves p a session of
// its own.
func underParent(ctx context.Context, st Store, r Request, p *fence.CreateParams) error {
	pid := r.ParentSessionID
	if pid == "" {
		if r.ParentNativeID == "" || r.ParentNativeID == r.Origin.NativeId {
			return nil
		}
		parentKey := fence.RequestKey(r.Principal, originKey(&castv1.SessionOrigin{Agent: r.Origin.Agent, NativeId: r.ParentNativeID}))
		id, ok, err := st.RequestedSession(ctx, parentKey)
		if err != nil || !ok {
			return err
		}
		pid = id
	}
	parent, err := st.GetSession(ctx, pid)
	if e, ok := errs.As(err); ok && e.Kind == errs.KindNotFound {
		return nil // purged since: the run stands alone
	}
	if err != nil {
		return err
	}
	if r.ParentSessionID != "" && parent.Node != r.Node {
		return nil // moved since: the node may not nest under it
	}
	p.ParentID, p.RootID, p.Subagent, p.ParentCallID = parent.Id, parent.RootId, true, r.ParentCallID
	if parent.Creator != "" {
		p.Creator = parent.Creator // whoever may see the parent sees its workers
	}
	if p.RootID == "" {
		p.RootID = parent.Id
	}
	return nil
}

// originKey names an origin in a request id (bounded, one charset).
func originKey(o *castv1.SessionOrigin) string {
	sum := sha256.Sum256([]byte(o.Agent + "\x00" + o.NativeId))
	return "adopt." + hex.EncodeToString(sum[:16])
}
