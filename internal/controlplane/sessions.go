package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/archive"
	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fanout"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/moves"
	"github.com/cast-dev/cast/internal/placement"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/validate"
)

type sessionService struct {
	castv1.UnimplementedSessionServiceServer
	s *Server
}

func (h *sessionService) CreateSession(ctx context.Context, req *castv1.CreateSessionRequest) (*castv1.Session, error) {
	if err := validCreate(req); err != nil {
		return nil, err
	}
	in, err := h.inherit(ctx, req)
	if err != nil {
		return nil, err
	}
	want := placement.Want{Node: req.Node, Origin: req.OriginNode, Agent: req.Agent, Cwd: req.Cwd,
		CwdOnCaller: in.onCaller, Import: req.HistoryMessages > 0} // an import runs no CLI until it is given a message
	rk := fence.RequestKey(caller(ctx), req.RequestId)
	placed, err := h.s.placeSession(ctx, want)
	if err != nil {
		if placed, err = h.s.placedBefore(ctx, rk, err); err != nil {
			return nil, toStatus(h.s.lg, err)
		}
	}
	var first *castv1.Message
	if req.Text != "" {
		// A first message the store would refuse (too large) is refused
		// before the session is stored, so nothing is left behind.
		first = userMessage(req.Text, firstMessageID(req.RequestId))
		if err := h.s.store.CheckMessage(first); err != nil {
			return nil, toStatus(h.s.lg, err)
		}
	}
	if req.ValidateOnly {
		return &castv1.Session{Agent: req.Agent, Model: req.Model, Node: placed.Node, Cwd: placed.Cwd}, nil
	}
	title := req.Title
	if title == "" {
		title = validate.TitleFrom(req.Text)
	}
	params := fence.CreateParams{
		Agent: req.Agent, Model: req.Model, Cwd: placed.Cwd, Title: title, Node: placed.Node, RequestID: rk,
		HistorySeq: req.HistoryMessages, ParentID: req.ParentId, ParentCallID: req.ParentCallId, Subagent: req.ParentId != "" || req.Hidden, Account: in.account,
		WorktreeBranch: req.WorktreeBranch, DefaultWorktree: req.WorktreeDefault, Creator: in.creator,
	}
	c, err := h.create(ctx, params, want, placed)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	if first != nil {
		if _, err := h.s.store.Append(ctx, c.Session.Id, []*castv1.Message{first}, fence.Guard{}); err != nil {
			return nil, toStatus(h.s.lg, err)
		}
	}
	return h.s.store.GetSession(ctx, c.Session.Id)
}

// validCreate refuses a create request with a field out of shape, before
// anything is read or stored.
func validCreate(req *castv1.CreateSessionRequest) error {
	if _, ok := agents.Lookup(req.Agent); !ok {
		return withInfo(codes.InvalidArgument, "unknown agent "+validate.Show(req.Agent)+"; use one of "+strings.Join(agents.Names(), ", "), errs.ReasonUnknownAgent, nil)
	}
	if err := refuse(
		validate.Check(validate.Name, "node", req.Node),
		validate.Check(validate.Name, "origin_node", req.OriginNode),
		validate.Check(validate.RequestID, "request_id", req.RequestId),
		validate.Check(validate.Model, "model", req.Model),
		validate.Check(validate.Title, "title", req.Title),
		validate.Check(validate.Cwd, "cwd", req.Cwd),
		validate.Check(validate.SessionID, "parent_id", req.ParentId),
		validate.Check(validate.Ident, "parent_call_id", req.ParentCallId),
		validate.Check(validate.Branch, "worktree_branch", req.WorktreeBranch),
		// A history count past what is ever appended would mark every later
		// message as history (never delivered), like a runaway delivered_seq.
		validate.Range("history_messages", req.HistoryMessages, 0, maxHistoryMessages),
	); err != nil {
		return err
	}
	if err := validText(req.Text, true); err != nil {
		return err
	}
	if req.ParentCallId != "" && req.ParentId == "" {
		return invalid("parent_call_id names a call of the parent: it needs parent_id")
	}
	if req.HistoryMessages < 0 || (req.HistoryMessages > 0 && req.Text != "") {
		return invalid("history_messages must not be negative, and a session created with history takes no first message")
	}
	return nil
}

// inherited is what a new session takes from its parent (a worker's) or
// its caller: the fleet account, the person it is for, and whether
// its cwd is a path on the caller's machine.
type inherited struct {
	account, creator string
	onCaller         bool
}

// inherit is what req's session inherits; a worker's node and cwd default to its
// parent's (filled into req).
func (h *sessionService) inherit(ctx context.Context, req *castv1.CreateSessionRequest) (inherited, error) {
	l := inherited{onCaller: req.CwdOnCaller, creator: caller(ctx)} // else cwd is the node's own path
	if req.ParentId == "" {
		return l, nil
	}
	if err := validSessionID(req.ParentId); err != nil {
		return l, err
	}
	parent, err := h.s.store.GetSession(ctx, req.ParentId)
	if err != nil {
		return l, toStatus(h.s.lg, err)
	}
	l.creator = parent.Creator // a worker is its parent's person's
	if req.Agent == parent.Agent {
		// Workers follow their parent's account (an account is one
		// agent's credential set, so only on the same agent).
		l.account = parent.Account
	}
	if req.Node == "" {
		req.Node = parent.Node // a worker runs beside its parent unless told otherwise
		l.onCaller = false     // its folder is its parent's, that node's own
	}
	if req.Cwd == "" {
		req.Cwd = parent.Cwd
		req.WorktreeBranch = moves.BranchBeside(parent, req.Node, req.WorktreeBranch, req.WorktreeDefault)
	}
	return l, nil
}

// create stores the session where it was placed; one stored for the first
// node to connect, when a node connected meanwhile, is placed again among
// the connected nodes.
func (h *sessionService) create(ctx context.Context, params fence.CreateParams, want placement.Want, placed placement.Placed) (fence.Created, error) {
	c, err := h.s.store.CreateSession(ctx, params)
	if placed.Node == "" && errs.HasReason(err, errs.ReasonConflict) {
		if placed, err = h.s.placeSession(ctx, want); err == nil {
			params.Node, params.Cwd = placed.Node, placed.Cwd
			c, err = h.s.store.CreateSession(ctx, params)
		}
	}
	return c, err
}

// placedBefore is where the create that request key rk already made put
// its session, or placeErr when none did (placement.Retried).
func (s *Server) placedBefore(ctx context.Context, rk string, placeErr error) (placement.Placed, error) {
	id, err := placement.Retried(ctx, s.store, rk, placeErr)
	if err != nil {
		return placement.Placed{}, err
	}
	sess, err := s.store.GetSession(ctx, id)
	if err != nil {
		return placement.Placed{}, err
	}
	return placement.Placed{Node: sess.Node, Cwd: sess.Cwd}, nil
}

func (h *sessionService) GetSession(ctx context.Context, req *castv1.GetSessionRequest) (*castv1.Session, error) {
	id := getSessionID(req)
	if err := validSessionID(id); err != nil {
		return nil, err
	}
	sess, err := h.s.store.GetSession(ctx, id)
	return sess, toStatus(h.s.lg, err)
}

// getSessionID is the session a GetSession names: session_id, or the
// deprecated id an older client sends.
func getSessionID(req *castv1.GetSessionRequest) string {
	if req.GetSessionId() != "" {
		return req.GetSessionId()
	}
	return req.GetId() //nolint:staticcheck // the deprecated field older clients send
}

func (h *sessionService) ListSessions(ctx context.Context, req *castv1.ListSessionsRequest) (*castv1.ListSessionsResponse, error) {
	size, err := listArgs(req.PageSize, req.PageToken, defaultPageSize)
	if err != nil {
		return nil, err
	}
	f, err := parseFilter(req.Filter, sessionFields()...)
	if err != nil {
		return nil, err
	}
	// A user's page holds only its own sessions, and a filtered page only
	// the matching ones; the store fills the page from the sessions after
	// it, and a token resumes only the query that handed it out.
	p, scoped := authz.FromContext(ctx)
	own := scoped && !p.IsAdmin()
	q := store.SessionQuery{Size: size, Token: req.PageToken, IncludeSubagents: req.IncludeSubagents,
		Scope: scope(req.Filter, strconv.FormatBool(req.IncludeArchived), strconv.FormatBool(req.IncludeSubagents), p.String()),
		Keep: func(s *castv1.Session) bool {
			return (req.IncludeArchived || !s.Archived) && (!own || s.Creator == p.String()) &&
				f.Match(func(field string) []string { return sessionField(s, field) })
		}}
	list, next, err := h.s.store.QuerySessions(ctx, q)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.ListSessionsResponse{Sessions: list, NextPageToken: next}, nil
}

func (h *sessionService) SendMessage(ctx context.Context, req *castv1.SendMessageRequest) (*castv1.SendMessageResponse, error) {
	if err := validSessionID(req.SessionId); err != nil {
		return nil, err
	}
	if err := validText(req.Text, false); err != nil {
		return nil, err
	}
	if err := refuse(validate.Check(validate.RequestID, "request_id", req.RequestId)); err != nil {
		return nil, err
	}
	sess, err := h.s.store.GetSession(ctx, req.SessionId)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	// Refused if archived, or a fork whose copy stopped part way.
	m, err := h.s.appendUser(ctx, req.SessionId, req.Text, req.RequestId)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	// Stored either way; the caller warns when nothing will run it soon.
	connected, err := h.s.store.NodeConnected(ctx, sess.Node)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.SendMessageResponse{Message: m, Node: sess.Node, NodeConnected: connected}, nil
}

func (h *sessionService) DeleteSession(ctx context.Context, req *castv1.DeleteSessionRequest) (*castv1.DeleteSessionResponse, error) {
	if err := validSessionID(req.SessionId); err != nil {
		return nil, err
	}
	if req.Purge {
		// The purge's txn records the owner's release, relayed by the
		// replica holding the owner's stream (the dispatcher).
		if err := archive.Purge(ctx, h.s.store, req.SessionId); err != nil {
			return nil, toStatus(h.s.lg, err)
		}
		return &castv1.DeleteSessionResponse{Purged: true}, nil
	}
	sess, err := archive.Archive(ctx, h.s.store, req.SessionId)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.DeleteSessionResponse{Session: sess}, nil
}

// maxAppendBatch bounds one AppendMessages call; importers send batches.
const maxAppendBatch = 1000

func (h *sessionService) AppendMessages(ctx context.Context, req *castv1.AppendMessagesRequest) (*castv1.AppendMessagesResponse, error) {
	if err := validSessionID(req.SessionId); err != nil {
		return nil, err
	}
	// Closed to every message, as to sends: a user message appended here
	// is handed to the owner node to run like a sent one. The store refuses
	// it in the append's txn, so an archive that commits first wins.
	out, err := h.s.appendBatch(ctx, req.SessionId, req.Messages, fence.Guard{Open: true})
	if err != nil {
		return nil, err
	}
	return &castv1.AppendMessagesResponse{Messages: out}, nil
}

func (h *sessionService) ListMessages(ctx context.Context, req *castv1.ListMessagesRequest) (*castv1.ListMessagesResponse, error) {
	if err := validSessionID(req.SessionId); err != nil {
		return nil, err
	}
	if req.StartSeq < 0 || req.EndSeq < 0 || (req.EndSeq > 0 && req.StartSeq > req.EndSeq) {
		return nil, invalid("seq range %d:%d is not valid; seqs start at 1 and FROM must not exceed TO", req.StartSeq, req.EndSeq)
	}
	size, err := listArgs(req.PageSize, req.PageToken, 500)
	if err != nil {
		return nil, err
	}
	msgs, next, err := h.s.store.ListMessages(ctx, req.SessionId, req.StartSeq, req.EndSeq, size, req.PageToken)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.ListMessagesResponse{Messages: msgs, NextPageToken: next}, nil
}

func (h *sessionService) ExportSession(req *castv1.ExportSessionRequest, stream castv1.SessionService_ExportSessionServer) error {
	if err := validSessionID(req.SessionId); err != nil {
		return err
	}
	err := h.s.store.Export(stream.Context(), req.SessionId, func(sess *castv1.Session, msgs []*castv1.Message) error {
		return stream.Send(&castv1.ExportSessionResponse{Session: sess, Messages: msgs})
	})
	return toStatus(h.s.lg, err)
}

func (h *sessionService) SwitchSession(ctx context.Context, req *castv1.SwitchSessionRequest) (*castv1.Session, error) {
	if err := validSessionID(req.SessionId,
		validate.Check(validate.Name, "agent", req.Agent),
		validate.Check(validate.Model, "model", req.Model),
		validate.Check(validate.Model, "effort", req.Effort),
	); err != nil {
		return nil, err
	}
	sess, err := moves.Switch(ctx, h.s.store, h.s.briefer, moves.SwitchRequest{SessionID: req.SessionId, Agent: req.Agent, Model: req.Model, Effort: req.Effort, Failpoint: h.s.cfg.Failpoint})
	return sess, toStatus(h.s.lg, err)
}

func (h *sessionService) ForkSession(ctx context.Context, req *castv1.ForkSessionRequest) (*castv1.Session, error) {
	if err := validSessionID(req.SessionId); err != nil {
		return nil, err
	}
	if req.AtSeq < 0 {
		return nil, invalid("at_seq must not be negative")
	}
	if err := refuse(
		validate.Check(validate.Name, "node", req.Node),
		validate.Check(validate.RequestID, "request_id", req.RequestId),
		validate.Check(validate.Name, "agent", req.Agent),
		validate.Check(validate.Model, "model", req.Model),
		validate.Check(validate.Branch, "worktree_branch", req.WorktreeBranch),
	); err != nil {
		return nil, err
	}
	sess, err := moves.Fork(ctx, h.s.store, h.s.briefer, moves.ForkRequest{SessionID: req.SessionId, AtSeq: req.AtSeq,
		Agent: req.Agent, Model: req.Model, Node: req.Node, RequestID: fence.RequestKey(caller(ctx), req.RequestId), WorktreeBranch: req.WorktreeBranch,
		DefaultWorktree: req.WorktreeDefault})
	return sess, toStatus(h.s.lg, err)
}

// maxPermissionWait bounds one RequestPermission call; `cast mcp` asks
// again with the same request id when it runs out.
const maxPermissionWait = 10 * time.Minute

func (h *sessionService) RequestPermission(ctx context.Context, req *castv1.RequestPermissionRequest) (*castv1.RequestPermissionResponse, error) {
	if err := validSessionID(req.SessionId,
		validate.Need(validate.ClientID, "request_id", req.RequestId),
		validate.Need(validate.ToolName, "tool_name", req.ToolName),
		validate.Check(validate.PermissionArg, "input", req.Input),
	); err != nil {
		return nil, err
	}
	sess, err := h.s.store.AskPermission(ctx, req.SessionId, store.Permission{RequestID: req.RequestId, Tool: req.ToolName, Input: req.Input})
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	// The wait is set here, not by a turn report: a worker's parent hears
	// of it now (once per request, so a request asked again tells it
	// nothing more), or not at all. One answered meanwhile (sess nil)
	// waits on no one.
	if sess != nil {
		if err := moves.NotifyParentOfPermission(ctx, h.s.store, sess, req.RequestId); err != nil {
			h.s.lg.Warn("worker's parent not told of its permission request", zap.String("session", req.SessionId), zap.Error(err))
		}
	}
	wctx, cancel := h.s.streamContext(ctx)
	defer cancel()
	wctx, cancel2 := context.WithTimeout(wctx, maxPermissionWait)
	defer cancel2()
	done := h.s.permissionWait()
	p, err := h.s.watches.WaitPermission(wctx, req.SessionId, req.RequestId)
	done(p, err)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.RequestPermissionResponse{Allow: p.Allow, Message: p.Message}, nil
}

func (h *sessionService) AnswerPermission(ctx context.Context, req *castv1.AnswerPermissionRequest) (*castv1.AnswerPermissionResponse, error) {
	if err := validSessionID(req.SessionId,
		validate.Check(validate.ClientID, "request_id", req.RequestId),
		validate.Check(validate.Reason, "message", req.Message),
	); err != nil {
		return nil, err
	}
	p, err := h.s.store.AnswerPermission(ctx, req.SessionId, req.RequestId, req.Allow, req.Message)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.AnswerPermissionResponse{RequestId: p.RequestID, ToolName: p.Tool}, nil
}

func (h *sessionService) MergeSession(ctx context.Context, req *castv1.MergeSessionRequest) (*castv1.MergeSessionResponse, error) {
	if err := validSessionID(req.ForkId); err != nil {
		return nil, err
	}
	if err := validText(req.Message, true); err != nil {
		return nil, err
	}
	m, err := moves.Merge(ctx, h.s.store, moves.MergeRequest{ForkID: req.ForkId, Run: req.Run, Message: req.Message})
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.MergeSessionResponse{Parent: m.Parent, FromSeq: m.From, ToSeq: m.To,
		Included: int32(m.Included), Omitted: int32(m.Omitted), PromptSeq: m.PromptSeq}, nil
}

func (h *sessionService) HandoffSession(ctx context.Context, req *castv1.HandoffSessionRequest) (*castv1.HandoffSessionResponse, error) {
	if err := validSessionID(req.SessionId,
		validate.Check(validate.Name, "to_agent", req.ToAgent),
		validate.Check(validate.Model, "model", req.Model),
		validate.Check(validate.Name, "node", req.Node),
		validate.Check(validate.RequestID, "request_id", req.RequestId),
		validate.Check(validate.Name, "account", req.Account),
	); err != nil {
		return nil, err
	}
	if err := validText(req.Direction, true); err != nil {
		return nil, err
	}
	if len(req.Direction) > validate.MaxPrompt {
		return nil, invalid("direction is %d bytes; keep it under %d", len(req.Direction), validate.MaxPrompt)
	}
	res, err := moves.Handoff(ctx, h.s.store, h.s.briefer, moves.HandoffRequest{SessionID: req.SessionId, ToAgent: req.ToAgent,
		Model: req.Model, Node: req.Node, Direction: req.Direction, DryRun: req.DryRun, RequestID: fence.RequestKey(caller(ctx), req.RequestId), Account: req.Account})
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.HandoffSessionResponse{Session: res.Session, Prompt: res.Prompt, Brief: res.Brief, BriefSource: res.BriefSource}, nil
}

func (h *sessionService) InterruptSession(ctx context.Context, req *castv1.InterruptSessionRequest) (*castv1.InterruptSessionResponse, error) {
	if err := validSessionID(req.SessionId); err != nil {
		return nil, err
	}
	sess, err := h.s.store.GetSession(ctx, req.SessionId)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	idle, err := moves.RunsNothing(ctx, h.s.store, sess)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	if idle {
		// Nothing to stop: an op left behind would only reach the node
		// for nothing, and the caller should not hear "sent".
		return &castv1.InterruptSessionResponse{Idle: true}, nil
	}
	node, _, err := h.s.store.Owner(ctx, req.SessionId)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	// Through etcd, so the replica holding the owner's stream sends it.
	if err := h.s.store.RequestOp(ctx, req.SessionId, fence.OpInterrupt); err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	connected, err := h.s.store.NodeConnected(ctx, node)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.InterruptSessionResponse{Delivered: connected}, nil
}

func (h *sessionService) WatchSession(req *castv1.WatchSessionRequest, stream castv1.SessionService_WatchSessionServer) error {
	if err := validSessionID(req.SessionId); err != nil {
		return err
	}
	if req.StartSeq < 0 {
		return invalid("start_seq must not be negative")
	}
	// No streamContext: the fan-out ends its watches when the replica
	// stops (fanout.ErrStopped), which spares each of thousands of idle
	// streams a context of its own.
	ctx := stream.Context()
	h.s.m.WatchStreams.Inc()
	defer h.s.m.WatchStreams.Dec()
	err := h.s.watches.Watch(ctx, caller(ctx), req.SessionId, req.StartSeq, func(ev fanout.Event) error {
		return sendPrepared(stream, ev)
	})
	if errs.HasReason(err, authz.ReasonTooManyStreams) { // refused before the stream sent anything
		p, _ := authz.FromContext(ctx)
		return h.s.refused(ctx, &p, "/cast.v1.SessionService/WatchSession", err)
	}
	if err != nil {
		h.s.lg.Debug("watch ended", zap.Error(err))
	}
	if errors.Is(err, fanout.ErrStopped) || h.s.stopCx.Err() != nil && ctx.Err() == nil && (err == nil || errors.Is(err, context.Canceled)) {
		// Not the end of the session: this replica is stopping (the store
		// may see its context canceled mid-read rather than end cleanly).
		return withInfo(codes.Unavailable, "the control plane is shutting down; watch again from the next seq", errs.ReasonUnavailable, nil)
	}
	return toStatus(h.s.lg, err)
}

// appendUser stores a user message, refused (SESSION_ARCHIVED) once the
// session is archived, and (FORK_INCOMPLETE) by a fork whose copy of its
// parent stopped part way: the store checks both in the append's txn.
func (s *Server) appendUser(ctx context.Context, sessionID, text, clientID string) (*castv1.Message, error) {
	out, err := s.store.Append(ctx, sessionID, []*castv1.Message{userMessage(text, clientID)}, fence.Guard{Open: true})
	if err != nil {
		return nil, err
	}
	return out[0], nil // the dispatcher hands it to the owner node
}

// appendBatch checks and stores a batch a client (AppendMessages) or the
// owner node (AppendOwnerMessages: g has its token, fence.Guard) sent, and
// answers with the rows stored or the refusal as a status.
func (s *Server) appendBatch(ctx context.Context, sessionID string, msgs []*castv1.Message, g fence.Guard) ([]*castv1.Message, error) {
	if err := validMessages(msgs, maxAppendBatch, g.Token != 0); err != nil {
		return nil, err
	}
	out, err := s.store.Append(ctx, sessionID, msgs, g)
	return out, toStatus(s.lg, err)
}

// firstMessageID is the client id of a create's first message, so a
// retried create stores it once: the request id with ".m1", or, where that
// would pass the 128-byte cap of a client id (the store refuses it, after
// the session is stored), a digest of the request id. "" for none.
func firstMessageID(requestID string) string {
	if requestID == "" {
		return ""
	}
	if cid := requestID + ".m1"; ids.ValidClientID(cid) {
		return cid // as before: ids of creates made by older versions stay the same
	}
	sum := sha256.Sum256([]byte(requestID))
	return "m1." + hex.EncodeToString(sum[:])
}

// userMessage is a user message with text; an empty clientID gets a new one.
func userMessage(text, clientID string) *castv1.Message {
	if clientID == "" {
		clientID = ids.NewClientID()
	}
	return &castv1.Message{ClientId: clientID, Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: text}
}

// validSessionID refuses a request whose session id is missing or not
// well-formed, then one whose other fields fail their checks (refuse: the
// first failing one is named).
func validSessionID(id string, fields ...error) error {
	if id == "" {
		return invalid("session id is required")
	}
	return refuse(append([]error{validate.Check(validate.SessionID, "session id", id)}, fields...)...)
}

func validText(text string, optional bool) error {
	switch {
	case text == "" && !optional:
		return invalid("message is empty; say something")
	case strings.TrimSpace(text) == "" && text != "":
		return invalid("message is only whitespace; say something")
	}
	return refuse(validate.Check(validate.Prompt, "text", text))
}
