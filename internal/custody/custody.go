// Package custody keeps one writer per OAuth token family (issue 15).
//
// A subscription login (Claude's .credentials.json, Codex's auth.json in
// ChatGPT mode) carries a refresh token that the provider rotates on every
// refresh and that it treats as stolen when it is presented twice: the
// whole family is then revoked and every holder is logged out. Copying one
// stored file to several nodes, or writing an old snapshot back after a
// switch, is exactly that. So for each fleet account one node at a time,
// the custodian (elected through an etcd lease, see store's vault.go), holds
// the refresh token and refreshes inside the agent's own CLI; every rotated
// credential is stored with a compare-and-swap that never goes backwards.
// Every other node gets only the access token (the file without its
// refresh token, which both CLIs accept; docs/token-custody.md), replaced
// before it expires, and never writes a snapshot back. A file a CLI
// rewrote on its own is reported, and kept only if it is newer.
//
// This package imports no etcd, so the node may link it; the agents'
// credential files are read through Format, implemented per agent in
// internal/agents/<name> and looked up by name with agents.CredentialFor.
package custody

import (
	"errors"
	"time"

	"github.com/cast-dev/cast/internal/errs"
)

// Token is what custody needs to know of one credential file. It holds no
// secret: Access is only a fingerprint of the access token.
type Token struct {
	// Issued orders credentials of one family: a later refresh is always
	// greater. Codex: the access token's iat (else last_refresh). Claude
	// records no issue time, so its expiresAt (a fixed lifetime after
	// issue) orders it.
	Issued  time.Time
	Expires time.Time // the access token's expiry (zero: unknown)
	// HasRefresh: the file carries a refresh token, so the CLI reading it
	// would refresh on its own.
	HasRefresh bool
	// AccessID fingerprints the access token (a hash prefix, never the token).
	AccessID string
}

// Grant is a token endpoint's answer, as the CLI applies it to its file.
type Grant struct {
	Access, Refresh, IDToken string
	Expires, Issued          time.Time
}

// Format reads and trims one agent's credential file.
type Format interface {
	// File is the credential file's name in the agent's config folder.
	File() string
	// Parse reads a credential file (a clear error when it is not one).
	Parse(raw []byte) (Token, error)
	// AccessOnly is raw without its refresh token: what a non-custodian
	// node's CLI gets.
	AccessOnly(raw []byte) ([]byte, error)
	// RefreshToken returns the refresh token ("" when none).
	RefreshToken(raw []byte) (string, error)
	// Apply writes g into raw the way the CLI does after a refresh.
	Apply(raw []byte, g Grant) ([]byte, error)
}

// Stable reasons of custody's refusals.
const (
	// ReasonNotNewer: the record holds a newer credential.
	ReasonNotNewer = "CREDENTIAL_NOT_NEWER"
	// ReasonNotInCustody: the account has no login in custody (added
	// before custody was on, or an API key); nodes copy its file instead.
	ReasonNotInCustody = "NOT_IN_CUSTODY"
	// ReasonOff: the control plane runs without --token-custody.
	ReasonOff = "TOKEN_CUSTODY_OFF"
	// ReasonNotCustodian: a node asked for what only the account's
	// elected custodian gets (the refresh token, a refresh)
	// (PERMISSION_DENIED). NODE_NOT_CUSTODIAN is a node without the mark.
	ReasonNotCustodian = "NOT_ACCOUNT_CUSTODIAN"
)

// Unavailable says whether err means custody does not hold the account
// here, so the node falls back to copying its stored file.
func Unavailable(reason string) bool { return reason == ReasonNotInCustody || reason == ReasonOff }

// ErrNotNewer is returned when a credential is not newer than the stored
// one; nothing was written.
var ErrNotNewer = errs.New(errs.KindFailedPrecondition, ReasonNotNewer, "credential is not newer than the stored one; kept the stored one")

// IsNotNewer reports whether err is ErrNotNewer.
func IsNotNewer(err error) bool { return errors.Is(err, ErrNotNewer) }

// Expiring says whether tok must be replaced at now: its access token
// expires within margin.
func Expiring(tok Token, now time.Time, margin time.Duration) bool {
	return !tok.Expires.IsZero() && !now.Add(margin).Before(tok.Expires)
}
