// Package metrics defines every cast_ Prometheus metric in one place, so
// names, units and labels stay consistent (cast_ prefix, base units, _total on
// counters, no per-session labels).
package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cast-dev/cast/internal/version"
)

// Store holds the store's metrics.
type Store struct {
	RequestSeconds      *prometheus.HistogramVec // op
	AppendedMessages    prometheus.Counter
	AppendBatchSize     prometheus.Histogram
	TranscriptBytes     prometheus.Counter
	TxnConflicts        *prometheus.CounterVec // op
	OwnerWritesRejected *prometheus.CounterVec // reason
	QuotaRejections     prometheus.Counter
	DBSizeBytes         prometheus.Gauge
	QuotaBytes          prometheus.Gauge
	BackendQuotaBytes   prometheus.Gauge
	ChunksSwept         prometheus.Counter
	NoSpaceAlarm        prometheus.Gauge
	NoSpaceRecoveries   *prometheus.CounterVec // outcome: recovered, failed
	Reclaims            *prometheus.CounterVec // outcome: freed, nothing_freed
	SegmentsWritten     prometheus.Counter
	BytesMoved          prometheus.Counter
	OrphanSegmentsSwept prometheus.Counter
	SegmentsPurged      prometheus.Counter
	ClientIDsPruned     prometheus.Counter
}

// NewStore creates and registers store metrics on reg (nil: unregistered).
func NewStore(reg prometheus.Registerer) *Store {
	d := on(reg)
	m := &Store{
		RequestSeconds: d.histogramVec("cast_store_request_duration_seconds", "Latency of store operations against etcd.",
			prometheus.ExponentialBuckets(0.0005, 2, 14), "op"),
		AppendedMessages: d.counter("cast_store_appended_messages_total", "Messages appended to transcripts."),
		AppendBatchSize: d.histogram("cast_store_append_batch_messages", "Messages committed per append transaction.",
			[]float64{1, 2, 4, 8, 16, 32, 64}),
		TranscriptBytes:     d.counter("cast_store_transcript_bytes_total", "Encoded transcript bytes written."),
		TxnConflicts:        d.counterVec("cast_store_txn_conflicts_total", "Transactions retried after a concurrent change.", "op"),
		OwnerWritesRejected: d.counterVec("cast_store_owner_write_rejected_total", "Owner-side writes refused (stale token or fence).", "reason"),
		QuotaRejections:     d.counter("cast_store_quota_rejections_total", "Writes refused because the store is near its quota."),
		DBSizeBytes:         d.gauge("cast_store_db_size_bytes", "etcd backend size last seen."),
		QuotaBytes:          d.gauge("cast_store_quota_bytes", "Backend size the store refuses writes at."),
		BackendQuotaBytes: d.gauge("cast_store_backend_quota_bytes",
			"etcd's backend quota (--quota-backend-bytes) as the store is told it (--store-quota-bytes)."),
		ChunksSwept:  d.counter("cast_store_orphan_chunks_swept_total", "Chunk keys of append attempts that never committed, deleted by the sweep."),
		NoSpaceAlarm: d.gauge("cast_store_nospace_alarm", "1 while etcd's NOSPACE alarm is raised (the store is read-only)."),
		NoSpaceRecoveries: d.counterVec("cast_store_nospace_recoveries_total",
			"Recoveries from etcd's NOSPACE alarm (compact, defragment, disarm) by outcome.", "outcome"),
		Reclaims: d.counterVec("cast_store_reclaims_total",
			"Compactions and defragmentations run because etcd's file neared the quota, by outcome.", "outcome"),
		SegmentsWritten: d.counter("cast_store_tier_segments_written_total",
			"Segments of history moved from etcd to the object store (written, verified, committed)."),
		BytesMoved: d.counter("cast_store_tier_bytes_moved_total",
			"Message bytes (before compression) moved from etcd to the object store."),
		OrphanSegmentsSwept: d.counter("cast_store_tier_orphan_segments_swept_total",
			"Segments no index entry points at (a move that crashed or lost its txn, a purged session), deleted."),
		SegmentsPurged: d.counter("cast_store_tier_segments_purged_total",
			"Segments of purged sessions (cast rm --purge, --retain) deleted from the object store with them."),
		ClientIDsPruned: d.counter("cast_store_tier_client_ids_pruned_total",
			"Client id records of messages moved to the object store, deleted from etcd once older than the dedupe window."),
	}
	Preinit(m.TxnConflicts, []string{"append", "create_session", "update_session", "purge_session",
		"commit_handover", "update_migration", "update_account", "prune_client_ids"})
	Preinit(m.OwnerWritesRejected, []string{"not_owner", "fenced"})
	Preinit(m.NoSpaceRecoveries, []string{"recovered", "failed"})
	Preinit(m.Reclaims, []string{"freed", "nothing_freed"})
	return m
}

// Retention holds the retention sweep's metrics (--retain).
type Retention struct {
	Purged *prometheus.CounterVec // rule: the --retain principal that matched
	// WouldPurge is, under --retain-dry-run, what the last sweep found
	// past its rule's window (and purged none of), by rule.
	WouldPurge *prometheus.GaugeVec
	Errors     prometheus.Counter
}

// NewRetention creates and registers them on reg (nil: unregistered), with
// each rule's principal at 0.
func NewRetention(reg prometheus.Registerer, rules []string) *Retention {
	d := on(reg)
	m := &Retention{
		Purged: d.counterVec("cast_retention_purged_sessions_total",
			"Sessions purged (etcd keys and segments) because their last activity was older than their --retain rule's window, by rule.", "rule"),
		WouldPurge: d.gaugeVec("cast_retention_would_purge_sessions",
			"Under --retain-dry-run: sessions the last sweep found idle past their --retain rule's window, by rule; none was purged.", "rule"),
		Errors: d.counter("cast_retention_errors_total", "Sessions the retention sweep could not read or purge (retried next sweep)."),
	}
	Preinit(m.Purged, rules)
	Preinit(m.WouldPurge, rules)
	return m
}

// SetBuildInfo exports cast_build_info at 1 on reg: this binary's version
// and the capability version it speaks (the control plane's and the
// node's each count their own), so dashboards and alerts see every daemon
// by version.
func SetBuildInfo(reg prometheus.Registerer, capabilityVersion int) {
	bi := version.Get()
	on(reg).gaugeVec("cast_build_info", "Build metadata; always 1.", "version", "revision", "goversion", "capability_version").
		WithLabelValues(bi.Version, bi.Revision, bi.GoVersion, strconv.Itoa(capabilityVersion)).Set(1)
}

// ControlPlane holds the control plane's fleet metrics.
type ControlPlane struct {
	NodesConnected prometheus.Gauge
	// NodesDown counts registered nodes whose lease is not held: a node
	// stays down until it reconnects or `cast node rm` removes it.
	NodesDown        prometheus.Gauge
	ConnectStreams   prometheus.Gauge
	Heartbeats       prometheus.Counter
	HeartbeatExpired prometheus.Counter
	CommandsSent     *prometheus.CounterVec // kind
	// Sessions counts stored sessions by agent and state as of the last
	// count (every replica counts the whole store: dashboards take max).
	Sessions     *prometheus.GaugeVec // agent, state
	WatchStreams prometheus.Gauge
	// PermissionWaiting counts RequestPermission calls blocked on a person
	// on this replica; PermissionWaitSeconds how long each waited.
	PermissionWaiting     prometheus.Gauge
	PermissionWaitSeconds *prometheus.HistogramVec // outcome: allowed, denied, abandoned
}

// NewControlPlane creates and registers control plane metrics.
func NewControlPlane(reg prometheus.Registerer) *ControlPlane {
	d := on(reg)
	m := &ControlPlane{
		NodesConnected:   d.gauge("cast_controlplane_nodes_connected", "Nodes whose liveness lease is held."),
		NodesDown:        d.gauge("cast_controlplane_nodes_down", "Registered nodes whose liveness lease is not held (down until they reconnect or are removed)."),
		ConnectStreams:   d.gauge("cast_controlplane_node_connect_streams", "Open node Connect streams on this replica."),
		Heartbeats:       d.counter("cast_controlplane_node_heartbeats_total", "Node heartbeats received."),
		HeartbeatExpired: d.counter("cast_controlplane_node_heartbeat_expired_total", "Nodes marked down because their lease lapsed."),
		CommandsSent:     d.counterVec("cast_controlplane_node_commands_total", "Commands sent down node streams.", "kind"),
		Sessions: d.gaugeVec("cast_sessions",
			"Stored sessions by agent and state (idle, running, waiting_permission, parked, failed), as of the last count.", "agent", "state"),
		WatchStreams:      d.gauge("cast_controlplane_watch_streams", "Open WatchSession streams on this replica (cast watch, cast exec, UIs)."),
		PermissionWaiting: d.gauge("cast_permission_requests_waiting", "Agent permission requests waiting on a person on this replica."),
		PermissionWaitSeconds: d.histogramVec("cast_permission_wait_seconds",
			"How long agent permission requests waited on a person, by outcome (allowed, denied, abandoned).",
			prometheus.ExponentialBuckets(1, 2, 12), "outcome"),
	}
	Preinit(m.PermissionWaitSeconds, PermissionOutcomes)
	return m
}

// NewWatchFanout registers the fan-out hub's counters, read from the hub
// when scraped: watchers sent to catch up from the store (a full buffer,
// or a new feed) and feeds started. Both should stay near flat; a climb
// means slow watch clients or an etcd watch that keeps breaking.
func NewWatchFanout(reg prometheus.Registerer, fellBehind, feeds func() int64) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cast_controlplane_watch_fell_behind_total",
			Help: "Times a session watch on this replica fell behind the live feed (or the feed restarted) and caught up from the store."},
			func() float64 { return float64(fellBehind()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cast_controlplane_watch_feeds_total",
			Help: "Etcd session feeds this replica started (one runs at a time; each restart sends every watch to catch up)."},
			func() float64 { return float64(feeds()) }),
	)
}

// PermissionOutcomes are the outcome label values of cast_permission_wait_seconds.
var PermissionOutcomes = []string{"allowed", "denied", "abandoned"}

// Migration holds the migration manager's metrics.
type Migration struct {
	Sessions     *prometheus.CounterVec   // outcome: succeeded, failed, cancelled
	PhaseSeconds *prometheus.HistogramVec // phase: fence, drain, worktree, commit
	Active       prometheus.Gauge
}

// NewMigration creates and registers migration metrics.
func NewMigration(reg prometheus.Registerer) *Migration {
	d := on(reg)
	m := &Migration{
		Sessions: d.counterVec("cast_migration_sessions_total", "Sessions whose migration ended, by outcome.", "outcome"),
		PhaseSeconds: d.histogramVec("cast_migration_phase_seconds", "Time a session spent in each migration phase.",
			prometheus.ExponentialBuckets(0.001, 4, 10), "phase"),
		Active: d.gauge("cast_migrations_active", "Migrations running on this replica."),
	}
	// Exported at 0 before the first event: increase() sees a replica's
	// first failure, and CastMigrationStuck sees no phase progressing.
	Preinit(m.Sessions, MigrationOutcomes)
	Preinit(m.PhaseSeconds, MigrationPhases)
	return m
}

// MigrationOutcomes are the outcome label values of
// cast_migration_sessions_total (migrate.StateName of the end states).
var MigrationOutcomes = []string{"succeeded", "failed", "cancelled", "handed_off"}

// Migration phases: the phase label values of cast_migration_phase_seconds.
const (
	PhaseFence    = "fence"
	PhaseDrain    = "drain"
	PhaseWorktree = "worktree"
	PhaseCommit   = "commit"
)

// MigrationPhases lists every phase.
var MigrationPhases = []string{PhaseFence, PhaseDrain, PhaseWorktree, PhaseCommit}

// Fleet holds the fleet accounts' metrics.
type Fleet struct {
	Switches *prometheus.CounterVec // agent, reason: fleet.SwitchReasons
	Limited  *prometheus.CounterVec // agent
	Accounts *prometheus.GaugeVec   // agent, state: open, limited (as of the last sweep)
	// Usage windows as of the last sweep, by agent, account and window.
	// account is the account's name only when the operator allows it
	// (--metrics-account-names), else "active" or "best" (the account a
	// switch would pick); names are capped per agent, windows per account.
	UsagePercent      *prometheus.GaugeVec // agent, account, window
	UsageResetSeconds *prometheus.GaugeVec // agent, account, window
	UsageAgeSeconds   *prometheus.GaugeVec // agent, account
}

// NewFleet creates and registers fleet account metrics.
func NewFleet(reg prometheus.Registerer) *Fleet {
	d := on(reg)
	return &Fleet{
		Switches: d.counterVec("cast_account_switches_total",
			"Activations of a fleet account, by agent and reason (limit, manual, reset, crowded, approved).", "agent", "reason"),
		Limited:  d.counterVec("cast_account_limits_total", "Usage limits reported on fleet accounts, by agent.", "agent"),
		Accounts: d.gaugeVec("cast_fleet_accounts", "Fleet accounts by agent and state (open, limited), as of the last sweep.", "agent", "state"),
		UsagePercent: d.gaugeVec("cast_fleet_usage_percent",
			"Used percentage of a fleet account's usage window as last reported, by agent, account and window.", "agent", "account", "window"),
		UsageResetSeconds: d.gaugeVec("cast_fleet_usage_reset_seconds",
			"Seconds until a fleet account's usage window resets, by agent, account and window.", "agent", "account", "window"),
		UsageAgeSeconds: d.gaugeVec("cast_fleet_usage_age_seconds",
			"How old a fleet account's usage figures are, by agent and account.", "agent", "account"),
	}
}

// Node holds a node daemon's metrics (node --metrics-listen). Labels are
// bounded: agent names and turn outcomes, never session ids.
type Node struct {
	Turns       *prometheus.CounterVec   // agent, outcome
	TurnSeconds *prometheus.HistogramVec // agent, outcome: succeeded, failed (any reason)
	Running     prometheus.Gauge
	// SyncLagSeconds is how long a native transcript entry took from the
	// runner reading it off the agent's file to its append acknowledged by
	// the control plane.
	SyncLagSeconds *prometheus.HistogramVec // agent
	SyncFailures   prometheus.Counter
	// ReportsDropped counts turn reports the control plane refused for
	// good (the session purged, a request it never takes): dropped, not
	// sent again.
	ReportsDropped prometheus.Counter
	// Commands counts the control plane's commands the node handled: a
	// reconnect's resync is one assign for every session it owns.
	Commands *prometheus.CounterVec // kind
}

// NewNode creates and registers node metrics.
func NewNode(reg prometheus.Registerer) *Node {
	d := on(reg)
	return &Node{
		Turns: d.counterVec("cast_node_turns_total",
			"Agent turns this node ran, by agent and outcome (succeeded, or the runner's reason).", "agent", "outcome"),
		TurnSeconds: d.histogramVec("cast_node_turn_duration_seconds", "How long agent turns ran, by agent and outcome (succeeded, or failed for any reason).",
			prometheus.ExponentialBuckets(0.5, 2, 12), "agent", "outcome"),
		Running: d.gauge("cast_node_turns_running", "Agent turns running now."),
		SyncLagSeconds: d.histogramVec("cast_node_sync_lag_seconds",
			"Time from the runner reading a native transcript entry to the control plane acknowledging its append, by agent.",
			prometheus.ExponentialBuckets(0.01, 2, 14), "agent"),
		SyncFailures:   d.counter("cast_node_sync_failures_total", "Appends of synced transcript entries the control plane did not acknowledge (retried)."),
		ReportsDropped: d.counter("cast_node_turn_reports_dropped_total", "Turn state reports the control plane refused for good (the session purged, a request it never takes), dropped rather than sent again."),
		Commands: d.counterVec("cast_node_commands_total",
			"Commands from the control plane this node handled, refused ones included, by kind, the name of the command's field (assign_session, deliver_messages, interrupt, ...).", "kind"),
	}
}
