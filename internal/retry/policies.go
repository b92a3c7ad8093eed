package retry

import "time"

// The named policies, where attempts genuinely differ. A policy that
// depends on configuration is a function of it.
var (
	// Outage: a CLI call (or watch) riding out a control plane restart,
	// which takes seconds, not milliseconds.
	Outage = Policy{Min: 250 * time.Millisecond, Max: 2 * time.Second, Jitter: 0.2, Limit: 30 * time.Second}

	// EtcdWatch: re-opening an etcd watch etcd canceled (a lost leader
	// lasts seconds). Its Limit is a Budget's.
	EtcdWatch = Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second, Jitter: 0.2, Limit: 15 * time.Second}

	// GitIndexLock: a git command that met another's index lock, which is
	// held for a moment.
	GitIndexLock = Policy{Min: 250 * time.Millisecond, Max: 500 * time.Millisecond, Tries: 3}

	// CredentialResend: the fresh SetCredential a node gets when it
	// fetched with a grant that was refused, per node and agent until a
	// fetch works. Max is a grant's life (a minute): a grant that lapsed
	// unused is always older than the pause, so its node is sent another.
	CredentialResend = Policy{Min: time.Second, Max: time.Minute}

	// FaultCheck: the fault suite's checker reading after a fault healed,
	// while a client may still be reconnecting (about 15s).
	FaultCheck = Policy{Min: 500 * time.Millisecond, Max: 500 * time.Millisecond, Tries: 30}
)

// Reconnect: a node calling a control plane that is away, from min
// doubling to max (its --reconnect-min/max), with no end but its context;
// the jitter spreads a fleet's nodes after a control plane restart.
func Reconnect(min, max time.Duration) Policy {
	return Policy{Min: min, Max: max, Jitter: 0.5}
}

// SyncFlush: a turn's last synced rows, stored again while the control
// plane is away (the caller bounds the attempts by what failed). Its pauses
// are the node's --reconnect-min/max, but at most syncFlushMax apart: the
// rows' cap from before the flags, below the default --reconnect-max.
func SyncFlush(first, longest time.Duration) Policy {
	return Policy{Min: first, Max: min(longest, syncFlushMax), Jitter: 0.2}
}

const syncFlushMax = 5 * time.Second
