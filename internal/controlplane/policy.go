package controlplane

import (
	"context"
	"sync"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

var (
	adminOnly = []authz.Role{authz.Admin}
	people    = []authz.Role{authz.Admin, authz.User}
	// nodes: admins may do everything, acting as a node included (they may
	// enroll any node anyway); test harnesses play nodes that way.
	nodes    = []authz.Role{authz.Admin, authz.Node}
	everyone = []authz.Role{authz.Admin, authz.User, authz.Node}
)

// policy is the rule of every RPC the control plane serves; a test fails
// when a method of a registered service has none (and such a call is
// refused). Nodes act only as themselves (the node in a request must be
// the credential's) and on the sessions they own; agents a node runs reach
// the API with its credential (`cast spawn`, `cast mcp`), so nodes may read
// and fork their own sessions but never answer a permission request. Users
// see and move only the sessions they created; fleet accounts and tokens
// are admin only.
func (s *Server) newPolicy() authz.Policy {
	sess := s.checkSession
	return authz.Policy{
		castv1.SessionService_CreateSession_FullMethodName:     {Roles: everyone, Check: s.checkCreate},
		castv1.SessionService_ListSessions_FullMethodName:      {Roles: people}, // filtered per user in the handler
		castv1.SessionService_GetSession_FullMethodName:        {Roles: everyone, Check: sess},
		castv1.SessionService_ListMessages_FullMethodName:      {Roles: everyone, Check: sess},
		castv1.SessionService_ExportSession_FullMethodName:     {Roles: everyone, Check: sess},
		castv1.SessionService_WatchSession_FullMethodName:      {Roles: everyone, Check: sess},
		castv1.SessionService_SendMessage_FullMethodName:       {Roles: everyone, Check: sess},
		castv1.SessionService_AppendMessages_FullMethodName:    {Roles: people, Check: sess},
		castv1.SessionService_SwitchSession_FullMethodName:     {Roles: everyone, Check: sess},
		castv1.SessionService_ForkSession_FullMethodName:       {Roles: everyone, Check: sess},
		castv1.SessionService_MergeSession_FullMethodName:      {Roles: everyone, Check: sess},
		castv1.SessionService_HandoffSession_FullMethodName:    {Roles: everyone, Check: sess},
		castv1.SessionService_InterruptSession_FullMethodName:  {Roles: everyone, Check: sess},
		castv1.SessionService_RequestPermission_FullMethodName: {Roles: []authz.Role{authz.Admin, authz.Node}, Check: sess},
		castv1.SessionService_AnswerPermission_FullMethodName:  {Roles: people, Check: sess},
		castv1.SessionService_DeleteSession_FullMethodName:     {Roles: people, Check: sess},
		castv1.SessionService_SetWorkspace_FullMethodName:      {Roles: people, Check: sess},

		castv1.NodeService_Connect_FullMethodName:    {Roles: nodes, Check: checkNodeSelf},
		castv1.NodeService_ListNodes_FullMethodName:  {Roles: everyone},
		castv1.NodeService_DeleteNode_FullMethodName: {Roles: adminOnly}, // revokes its credential too
		castv1.NodeService_LabelNode_FullMethodName:  {Roles: adminOnly}, // cast.dev/custodian lets a node hold fleet logins
		// Probing runs the node's CLIs (a model call each): its admin asks,
		// or the node itself.
		castv1.NodeService_ProbeNode_FullMethodName:           {Roles: nodes, Check: checkNodeSelf},
		castv1.NodeService_AppendOwnerMessages_FullMethodName: {Roles: nodes, Check: checkNodeSelf},
		castv1.NodeService_ReportTurn_FullMethodName:          {Roles: nodes, Check: checkNodeSelf},
		castv1.NodeService_UploadWorkTree_FullMethodName:      {Roles: nodes, Check: checkNodeSelf},
		castv1.NodeService_DownloadWorkTree_FullMethodName:    {Roles: nodes, Check: checkNodeSelf},
		castv1.NodeService_ReportWorkTree_FullMethodName:      {Roles: nodes, Check: checkNodeSelf},
		castv1.NodeService_FetchCredential_FullMethodName:     {Roles: nodes, Check: checkNodeSelf},
		castv1.NodeService_ReportWorkspace_FullMethodName:     {Roles: nodes, Check: checkNodeSelf},
		// Worktrees hold sessions: a user sees and removes only those whose
		// every session is theirs (filtered and checked in the handlers).
		castv1.NodeService_ListWorktrees_FullMethodName:  {Roles: people},
		castv1.NodeService_RemoveWorktree_FullMethodName: {Roles: people},
		castv1.NodeService_Custody_FullMethodName:        {Roles: nodes, Check: checkNodeSelf},
		// A node keeps the native sessions it finds (internal/adoption
		// checks which sessions it may add to).
		castv1.NodeService_AdoptSession_FullMethodName: {Roles: nodes, Check: checkNodeSelf},

		castv1.MigrationService_StartMigration_FullMethodName:  {Roles: people, Check: s.checkMigration},
		castv1.MigrationService_GetMigration_FullMethodName:    {Roles: people, Check: s.checkMigration},
		castv1.MigrationService_CancelMigration_FullMethodName: {Roles: people, Check: s.checkMigration},
		castv1.MigrationService_ListMigrations_FullMethodName:  {Roles: people}, // filtered per user in the handler

		castv1.AccountService_PutAccount_FullMethodName:          {Roles: adminOnly},
		castv1.AccountService_ListAccounts_FullMethodName:        {Roles: adminOnly},
		castv1.AccountService_DeleteAccount_FullMethodName:       {Roles: adminOnly},
		castv1.AccountService_UseAccount_FullMethodName:          {Roles: adminOnly},
		castv1.AccountService_SetAccountPolicy_FullMethodName:    {Roles: adminOnly},
		castv1.AccountService_AnswerAccountChoice_FullMethodName: {Roles: adminOnly},

		castv1.AuthService_CreateToken_FullMethodName:     {Roles: adminOnly},
		castv1.AuthService_ListTokens_FullMethodName:      {Roles: adminOnly},
		castv1.AuthService_DeleteToken_FullMethodName:     {Roles: adminOnly},
		castv1.AuthService_CreateJoinToken_FullMethodName: {Roles: adminOnly},
		castv1.AuthService_RevokeNode_FullMethodName:      {Roles: adminOnly},
		castv1.AuthService_JoinNode_FullMethodName:        {Public: true}, // the join token is the credential
		castv1.AuthService_WhoAmI_FullMethodName:          {Roles: everyone},
		// A browser signs in as the person who asked (internal/web).
		castv1.AuthService_CreateWebLogin_FullMethodName: {Roles: people},
		// A certificate for the caller's own key, bound to its own credential.
		castv1.AuthService_IssueCertificate_FullMethodName: {Roles: everyone},
		// CA rotation (carotation.go). The bundle is public certificates
		// only; a client trusts it because it fetched it over a connection
		// it verified, not because of its own credential.
		castv1.AuthService_GetCABundle_FullMethodName: {Public: true},
		castv1.AuthService_GetCAStatus_FullMethodName: {Roles: adminOnly},
		castv1.AuthService_RotateCA_FullMethodName:    {Roles: adminOnly},
		castv1.AuthService_ActivateCA_FullMethodName:  {Roles: adminOnly},
		castv1.AuthService_RetireCA_FullMethodName:    {Roles: adminOnly},

		// Verdicts steer every user's moves: only nodes (each as itself)
		// and admins (`cast agents check`) record them; anyone reads them.
		castv1.AgentService_RecordAgentChecks_FullMethodName: {Roles: nodes, Check: checkNodeSelf},
		castv1.AgentService_ListAgentChecks_FullMethodName:   {Roles: everyone},
		castv1.AgentService_ListAgents_FullMethodName:        {Roles: everyone},

		castv1.VersionService_GetVersion_FullMethodName: {Public: true}, // as /version on a Kubernetes API server

		// The API's schema is public (proto/); reflection lets grpcurl list it.
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      {Public: true},
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": {Public: true},

		"/grpc.health.v1.Health/Check": {Public: true},
		"/grpc.health.v1.Health/Watch": {Public: true},
		"/grpc.health.v1.Health/List":  {Public: true},
	}
}

// requestNode is the node a node-side request names ("" for frames that
// name none, such as heartbeats).
func requestNode(req any) string {
	switch r := req.(type) {
	case *castv1.ConnectRequest:
		return r.GetHello().GetNode().GetName()
	case interface{ GetNode() string }:
		return r.GetNode()
	}
	return ""
}

// checkNodeSelf refuses a node naming another node: a node's name comes
// from its credential, so it cannot receive another's owner tokens, write
// as it or fetch its credentials.
func checkNodeSelf(_ context.Context, p authz.Principal, req any) error {
	if p.IsAdmin() {
		return nil
	}
	if n := requestNode(req); n != "" && n != p.Name {
		return authz.Denied(errs.ReasonNodeMismatch, "%s may not act as node %q", p, n)
	}
	return nil
}

// requestSession is the session a session request names.
func requestSession(req any) string {
	switch r := req.(type) {
	case *castv1.GetSessionRequest:
		return getSessionID(r)
	case *castv1.MergeSessionRequest:
		return r.GetForkId()
	case interface{ GetSessionId() string }:
		return r.GetSessionId()
	}
	return ""
}

// checkSession lets admins at every session, users at the sessions they
// created (forks inherit the creator), and nodes at the sessions they own
// or whose parent they own (an agent's `cast spawn` workers).
func (s *Server) checkSession(ctx context.Context, p authz.Principal, req any) error {
	id := requestSession(req)
	if p.IsAdmin() || id == "" {
		return nil // a missing id is the handler's INVALID_ARGUMENT
	}
	if p.Role == authz.User && s.creators.created(id, p.String()) {
		return nil
	}
	sess, err := s.store.GetSession(ctx, id)
	if err != nil {
		if e, ok := errs.As(err); ok && e.Kind == errs.KindNotFound {
			if r, ok := req.(*castv1.ListMessagesRequest); ok && r.PageToken != "" {
				// A page token (base64 JSON, forgeable) names a store
				// revision the handler reads at, where a purged session
				// is still there to read: gone now is gone.
				return err
			}
			return nil // the handler says NOT_FOUND; nothing leaks
		}
		return err
	}
	if err := s.maySee(ctx, p, sess); err != nil {
		return err
	}
	if p.Role == authz.User {
		s.creators.remember(id, sess.Creator)
	}
	return nil
}

// creatorCache remembers the creator of sessions a user was let use. A
// session's creator is set when it is made and never changes, so a user's
// next call on one of theirs needs no read of the session (an etcd txn per
// call, an append's included). Only a let is remembered: a refusal, or a
// session gone since (which passes the check either way: the handler says
// NOT_FOUND), reads again.
type creatorCache struct {
	mu sync.Mutex
	m  map[string]string // session id -> creator
}

// creatorCacheSize bounds the cache: past it, it starts over.
const creatorCacheSize = 10000

// created says whether session is known to be creator's.
func (c *creatorCache) created(session, creator string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.m[session]
	return ok && got == creator
}

func (c *creatorCache) remember(session, creator string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= creatorCacheSize {
		c.m = make(map[string]string)
	}
	c.m[session] = creator
}

func (s *Server) maySee(ctx context.Context, p authz.Principal, sess *castv1.Session) error {
	switch {
	case p.IsAdmin():
		return nil
	case p.Role == authz.User && sess.Creator == p.String():
		return nil
	case p.Role == authz.Node && sess.Node == p.Name:
		return nil
	case p.Role == authz.Node && sess.ParentId != "":
		parent, err := s.store.GetSession(ctx, sess.ParentId)
		if err == nil && parent.Node == p.Name {
			return nil
		}
	}
	return authz.Denied(errs.ReasonNotYourSession, "%s may not use session %s", p, sess.Id).With("session_id", sess.Id)
}

// checkMigration lets users move only their own sessions: a start names
// them (draining a node or moving all is admin only), and a migration
// they look at or cancel holds only theirs.
func (s *Server) checkMigration(ctx context.Context, p authz.Principal, req any) error {
	if p.IsAdmin() {
		return nil
	}
	var ids []string
	switch r := req.(type) {
	case *castv1.StartMigrationRequest:
		if r.FromNode != "" || r.All {
			return authz.Denied(errs.ReasonPermissionDenied, "%s may move only sessions it names; draining a node or moving all is admin only", p)
		}
		ids = r.SessionIds
	case interface{ GetId() string }:
		m, err := s.migrations.Get(ctx, r.GetId())
		if err != nil {
			return nil // the handler reports it
		}
		if !s.ownsMigration(ctx, p, m) {
			return authz.Denied(errs.ReasonNotYourSession, "%s may not use migration %s", p, r.GetId())
		}
		return nil
	}
	for _, id := range ids {
		if err := s.checkSession(ctx, p, &castv1.GetSessionRequest{SessionId: id}); err != nil {
			return err
		}
	}
	return nil
}

// ownsMigration reports whether every session m moves that still exists
// is p's, and one at least: a migration whose sessions are all gone
// (purged since) says nothing of whose it was, so it is an admin's, not
// every user's.
func (s *Server) ownsMigration(ctx context.Context, p authz.Principal, m *castv1.Migration) bool {
	if p.IsAdmin() {
		return true
	}
	mine := false
	for _, ms := range m.Sessions {
		sess, err := s.store.GetSession(ctx, ms.SessionId)
		if e, ok := errs.As(err); ok && e.Kind == errs.KindNotFound {
			continue
		}
		if err != nil || s.maySee(ctx, p, sess) != nil {
			return false
		}
		mine = true
	}
	return mine
}

// checkCreate lets a node create only workers of sessions it may use (an
// agent's `cast spawn`); anyone naming a parent must be allowed to use it.
func (s *Server) checkCreate(ctx context.Context, p authz.Principal, req any) error {
	r, ok := req.(*castv1.CreateSessionRequest)
	if !ok {
		return nil
	}
	if r.ParentId == "" {
		if p.Role == authz.Node {
			return authz.Denied(errs.ReasonPermissionDenied, "%s may create only workers of its own sessions (parent_id)", p)
		}
		return nil
	}
	return s.checkSession(ctx, p, &castv1.GetSessionRequest{SessionId: r.ParentId})
}
