// Package errs holds cast's typed errors. Cores (store, migrate, ...) return
// them; the gRPC edge maps them to status codes with a google.rpc.ErrorInfo
// reason in one place (internal/controlplane/status.go), and the CLI maps the
// reason back to advice. Reasons are stable UPPER_SNAKE strings: scripts
// match on them.
package errs

import (
	"errors"
	"fmt"
)

// Kind is the class of failure; it decides the gRPC code.
type Kind int

const (
	KindInternal           Kind = iota
	KindInvalid                 // the request is malformed
	KindNotFound                // the named thing does not exist
	KindAlreadyExists           // it exists and may not be created again
	KindFailedPrecondition      // the system is not in a state to do it
	KindAborted                 // a concurrent change won; retrying may work
	KindResourceExhausted       // a size or storage limit
	KindUnavailable             // try again later
	KindUnauthenticated         // no valid credential came with the call
	KindPermissionDenied        // the caller may not do this
	KindUnimplemented           // no such method
)

// Stable reasons.
const (
	ReasonInvalidArgument  = "INVALID_ARGUMENT"
	ReasonNotFound         = "NOT_FOUND"
	ReasonNotOwner         = "NOT_OWNER"
	ReasonSessionFenced    = "SESSION_FENCED"
	ReasonAgentSwitched    = "AGENT_SWITCHED"   // a turn starting on an agent the session was switched away from
	ReasonRefreshInDoubt   = "REFRESH_IN_DOUBT" // another node's token refresh is in flight or was cut off
	ReasonMessageTooLarge  = "MESSAGE_TOO_LARGE"
	ReasonStoreQuota       = "STORE_QUOTA_EXCEEDED"
	ReasonNoNode           = "NO_NODE_AVAILABLE"
	ReasonNodeNotConn      = "NODE_NOT_CONNECTED"
	ReasonConflict         = "CONFLICT"
	ReasonSessionChanged   = "SESSION_CHANGED" // a message was stored since the session was checked (fence.Guard.Unmoved)
	ReasonUnavailable      = "UNAVAILABLE"
	ReasonBadPageToken     = "INVALID_PAGE_TOKEN"
	ReasonBadFilter        = "INVALID_FILTER" // a List filter that does not parse or names an unknown field or value
	ReasonUnknownAgent     = "UNKNOWN_AGENT"
	ReasonInternal         = "INTERNAL"
	ReasonWorkTree         = "WORKTREE_NOT_MOVABLE"
	ReasonMigrationDone    = "MIGRATION_FINISHED"
	ReasonAccountActive    = "ACCOUNT_ACTIVE"
	ReasonAccountNotActive = "ACCOUNT_NOT_ACTIVE"
	ReasonNoGrant          = "CREDENTIAL_GRANT_INVALID"
	ReasonNoSecretsKey     = "SECRETS_KEY_MISSING"
	ReasonUnknownAccount   = "UNKNOWN_ACCOUNT"
	ReasonSessionArchived  = "SESSION_ARCHIVED"
	ReasonForkIncomplete   = "FORK_INCOMPLETE" // a fork whose copy of its parent stopped part way
	ReasonSessionBusy      = "SESSION_RUNNING"
	ReasonNodeBusy         = "NODE_OWNS_SESSIONS"
	ReasonNodeConnected    = "NODE_CONNECTED"
	// Workspaces (`cast workspace set`, `cast worktree rm`), as the owner
	// node refuses them.
	ReasonWorktreeBusy    = "WORKTREE_BUSY"    // an agent runs there
	ReasonWorktreeDirty   = "WORKTREE_DIRTY"   // local changes; --force removes them
	ReasonWorktreeUnknown = "WORKTREE_UNKNOWN" // not a worktree cast made
	ReasonWorkspaceFailed = "WORKSPACE_FAILED" // git or the file system failed
	// ReasonNoChoice: an answer came for an account choice nobody is
	// waiting on; ReasonNoHeadroom: an approved switch has no account to
	// go to.
	ReasonNoChoice   = "NO_ACCOUNT_CHOICE"
	ReasonNoHeadroom = "NO_ACCOUNT_HEADROOM"
	// ReasonClientIDReused: an append reused a client_id (request_id) that
	// is stored with a different body; the stored message is kept.
	ReasonClientIDReused = "CLIENT_ID_REUSED"
	// Authentication and authorization refusals (UNAUTHENTICATED and
	// PERMISSION_DENIED).
	ReasonUnauthenticated  = "UNAUTHENTICATED"
	ReasonPermissionDenied = "PERMISSION_DENIED"
	ReasonNodeMismatch     = "NODE_IDENTITY_MISMATCH"
	ReasonNotYourSession   = "SESSION_NOT_YOURS"
	ReasonJoinToken        = "JOIN_TOKEN_INVALID"
	// Client certificates (mTLS): expired (or not yet valid), not from
	// this control plane's CA, or bound to a credential since revoked.
	ReasonCertExpired   = "CERT_EXPIRED"
	ReasonCertUntrusted = "CERT_UNTRUSTED"
	ReasonCertRevoked   = "CERT_REVOKED"
	// A certificate was asked of a control plane serving plaintext
	// (--insecure), or by a caller signed in with an OIDC ID token, which
	// has no cast credential to bind one to.
	ReasonTLSRequired      = "TLS_REQUIRED"
	ReasonCertNoCredential = "CERT_NEEDS_CAST_CREDENTIAL"
	// ReasonSignedOut: the browser session a call came with ended while
	// it was open (sign-out, or its lifetime).
	ReasonSignedOut = "WEB_SIGNED_OUT"
	// ReasonNoWebApp: a login link was asked of a control plane that
	// serves no web app (no --web-listen).
	ReasonNoWebApp = "WEB_APP_NOT_SERVED"
	// CA rotation: the step does not fit the rotation's state (none under
	// way, or one already), or principals still depend on the CA (their
	// only live certificates are from it, or they do not trust the next).
	ReasonCAState = "CA_ROTATION_STATE"
	ReasonCAInUse = "CA_IN_USE"
	// A rotation step was stored, but the replica that took it cannot
	// load the CA record (its signing key is sealed with a secrets key
	// the replica lacks).
	ReasonCANotLoadable = "CA_NOT_LOADABLE"
	// OIDC ID tokens: past their exp; not this issuer's, not for this
	// client id, or not signed by the issuer's keys; or without a valid
	// user name claim.
	ReasonOIDCExpired = "OIDC_TOKEN_EXPIRED"
	ReasonOIDCInvalid = "OIDC_TOKEN_INVALID"
	ReasonOIDCClaim   = "OIDC_CLAIM_INVALID"

	// One code per reason (TestEveryReasonHasOneCode): where a reason was
	// made with two codes, the rarer one got a reason of its own.
	// ReasonAlreadyExists: a create named something that exists
	// (ALREADY_EXISTS); CONFLICT is a lost race (ABORTED).
	ReasonAlreadyExists = "ALREADY_EXISTS"
	// ReasonDeadlineExceeded: the call's deadline ran out before its
	// answer (DEADLINE_EXCEEDED); its outcome is unknown. UNAVAILABLE is
	// UNAVAILABLE's.
	ReasonDeadlineExceeded = "DEADLINE_EXCEEDED"
	// ReasonNodeLease: a node's own stream lost its lease (UNAVAILABLE):
	// it connects and registers again. NODE_NOT_CONNECTED is a node a
	// request names (FAILED_PRECONDITION).
	ReasonNodeLease = "NODE_LEASE_EXPIRED"
	// ReasonWorkTreeNotUploaded: a destination asked for a work tree the
	// source has not uploaded (yet) (FAILED_PRECONDITION);
	// WORKTREE_NOT_MOVABLE is a bundle over the limit (RESOURCE_EXHAUSTED).
	ReasonWorkTreeNotUploaded = "WORKTREE_NOT_UPLOADED"
	// A migration of a named session on its target already, or of no
	// session off it (FAILED_PRECONDITION; were CONFLICT and NOT_FOUND).
	ReasonOnTarget      = "ALREADY_ON_TARGET"
	ReasonNothingToMove = "NOTHING_TO_MOVE"
	// ReasonNoPermissionAsked: an answer came for a session with no
	// pending permission request (FAILED_PRECONDITION: the session
	// exists; was NOT_FOUND).
	ReasonNoPermissionAsked = "NO_PENDING_PERMISSION"
	// ReasonUnknownMethod: a call of a method (or service) the API does
	// not have (UNIMPLEMENTED).
	ReasonUnknownMethod = "UNKNOWN_METHOD"
)

// Error is a typed cast error.
type Error struct {
	Kind     Kind
	Reason   string
	Msg      string
	Metadata map[string]string
	Err      error // optional cause, never shown to clients
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Msg, e.Err)
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// New builds an Error.
func New(kind Kind, reason, format string, args ...any) *Error {
	return &Error{Kind: kind, Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// With adds metadata (kept in ErrorInfo) and returns e.
func (e *Error) With(key, value string) *Error {
	if e.Metadata == nil {
		e.Metadata = map[string]string{}
	}
	e.Metadata[key] = value
	return e
}

// Invalid is a malformed request.
func Invalid(format string, args ...any) *Error {
	return New(KindInvalid, ReasonInvalidArgument, format, args...)
}

// NotFound is a missing resource.
func NotFound(format string, args ...any) *Error {
	return New(KindNotFound, ReasonNotFound, format, args...)
}

// UnknownMethod is a call of a method (full name, as gRPC's path names
// it) the API does not have.
func UnknownMethod(method string) *Error {
	if len(method) > 200 {
		method = method[:200]
	}
	return New(KindUnimplemented, ReasonUnknownMethod, "%q is no method of the cast API", method)
}

// Internal wraps an unexpected failure; the cause stays server-side.
func Internal(err error, msg string) *Error {
	return &Error{Kind: KindInternal, Reason: ReasonInternal, Msg: msg, Err: err}
}

// As returns the *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// HasReason reports whether err carries reason.
func HasReason(err error, reason string) bool {
	e, ok := As(err)
	return ok && e.Reason == reason
}
