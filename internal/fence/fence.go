// Package fence is the vocabulary of session ownership and its fences,
// shared by the store that enforces them and the cores that use them
// (moves, migrate, fleet, turnstate, archive, retention, adoption): an
// owner's guard and fencing token, a node's lease, the ops relayed to an
// owner, a turn's reported state, a new session's parameters, and a
// migration's records and handover; and the one way to resend a range
// message by message (AppendEach) and to walk every session a page at a
// time (EachSession). It imports no etcd, so a core that speaks these
// words links none.
package fence

import castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"

// Guard makes an append owner-side: it commits only while the session's
// owner is Node with fencing token Token. The zero Guard is a user append,
// which never depends on the owner (a fenced session still takes messages).
type Guard struct {
	Node  string
	Token int64
	// Open makes a user append commit only while the session is open:
	// not archived (`cast rm`), and not a fork whose copy of its parent
	// stopped part way (ForkCopied), checked in the append's own txn. Set it on
	// messages sent to the session, which its owner would run or take in
	// (a send, an API append, a worker's report to its parent, a merge);
	// notices cast writes about the session go in either way, and so do
	// the owner's writes (a guard with a Token: a turn that started before
	// the archive ends with its output kept).
	Open bool
	// Unmoved makes an append commit only while the session's last seq is
	// still LastSeq, compared in the commit's own txn (the seq key the
	// append moves): a move that checked the session at LastSeq stores its
	// messages only if nothing was stored since, which its check did not
	// see. A merge checks its parent idle with no user message waiting;
	// a message stored after that check (a send, a worker's report) would
	// start a turn that the merged rows, stored after it, did not precede.
	// Its state needs no compare of its own: a turn starts only on a user
	// message past the delivery cursor, and the check found none through
	// LastSeq. Such an append commits whole or not at all (one txn, no
	// message stored when one is refused) and only batched alone; a
	// retry of one stored already is answered as stored. Refused with
	// ReasonSessionChanged (aborted: check the session again).
	Unmoved bool
	LastSeq int64
}

// Lease is a node's liveness lease. The node is connected exactly while its
// nodeconn key exists; etcd deletes it when the lease lapses, so "down" is
// decided by etcd, never by a replica's clock.
type Lease int64

// OwnerChange is a new owner and its fencing token.
type OwnerChange struct {
	Session string
	Node    string
	Token   int64
}

// OwnedSession is a session a node owns, with its fencing token.
type OwnedSession struct {
	Session *castv1.Session
	Token   int64
}

// Ops relayed to the replica that holds the owner node's stream.
const (
	OpInterrupt = "interrupt" // stop the running turn
	OpRefresh   = "refresh"   // the session record changed; re-assign it
	OpAbandon   = "abandon"   // stop the turn without marking its prompt delivered (moving)
)

// TurnState is what an owner reports about its session's turn.
type TurnState struct {
	State        castv1.SessionState
	Reason       string
	ExitCode     int32
	DeliveredSeq int64  // moves the delivery cursor forward, never back
	Cwd          string // the owner set the working directory (a new worktree); "" keeps it
	// Interrupted: an IDLE turn end someone stopped; ExitCode is then the
	// CLI's death by the node's signal, which the session does not show.
	Interrupted bool
	// Abandoned: an IDLE turn end no one asked for (a move, the node cut
	// off or stopping); the prompt runs again, so the turn has not ended
	// (castv1.Session.LastTurnAbandoned). ExitCode is the signal's, as for
	// Interrupted.
	Abandoned bool
	// HeldSeq: a FAILED or PARKED turn (Holds) kept the user messages
	// through it without running them; they wait for the next message, a
	// parked turn's also for the next fleet credential
	// (castv1.Session.HeldSeq).
	HeldSeq int64
	// Agent, on RUNNING, is the agent the starting turn runs; the store
	// refuses the start when the session now runs another (a switch
	// recorded first: ReasonAgentSwitched). "": not checked (older nodes).
	Agent string
}

// CapabilityTurnAgent is the first node capability_version
// (castv1.Node.capability_version) whose node names the agent of a turn's
// start (TurnState.Agent) and holds a turn the store refused
// (AGENT_SWITCHED, SESSION_ARCHIVED). An older node's start names none and
// is recorded whatever agent it runs, so a switch interrupts its turn
// about to start as well (moves.Switch).
const CapabilityTurnAgent = 2

// Holds reports whether a turn that ended in state may keep its messages
// without running them (HeldSeq): a failure the next message retries (the
// CLI not installed or not logged in, a turn not set up) and a usage
// limit the next fleet credential runs again.
func Holds(state castv1.SessionState) bool {
	return state == castv1.SessionState_SESSION_STATE_FAILED || state == castv1.SessionState_SESSION_STATE_PARKED
}

// TurnInFlight reports whether sess has a turn running (or stopped at a
// permission prompt).
func TurnInFlight(sess *castv1.Session) bool {
	return sess.State == castv1.SessionState_SESSION_STATE_RUNNING || sess.State == castv1.SessionState_SESSION_STATE_WAITING_PERMISSION
}
