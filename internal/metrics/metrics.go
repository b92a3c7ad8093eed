// Package metrics defines every cast_ Prometheus metric in one place, so
// names, units and labels stay consistent (cast_ prefix, base units, _total on
// counters, no per-session labels).
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
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
}

// NewStore creates and registers store metrics on reg (nil: unregistered).
func NewStore(reg prometheus.Registerer) *Store {
	m := &Store{
		RequestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cast_store_request_duration_seconds", Help: "Latency of store operations against etcd.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"op"}),
		AppendedMessages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cast_store_appended_messages_total", Help: "Messages appended to transcripts.",
		}),
		AppendBatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cast_store_append_batch_messages", Help: "Messages committed per append transaction.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}),
		TranscriptBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cast_store_transcript_bytes_total", Help: "Encoded transcript bytes written.",
		}),
		TxnConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cast_store_txn_conflicts_total", Help: "Transactions retried after a concurrent change.",
		}, []string{"op"}),
		OwnerWritesRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cast_store_owner_write_rejected_total", Help: "Owner-side writes refused (stale token or fence).",
		}, []string{"reason"}),
		QuotaRejections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cast_store_quota_rejections_total", Help: "Writes refused because the store is near its quota.",
		}),
		DBSizeBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cast_store_db_size_bytes", Help: "etcd backend size last seen.",
		}),
		QuotaBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cast_store_quota_bytes", Help: "Backend size the store refuses writes at.",
		}),
		BackendQuotaBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cast_store_backend_quota_bytes", Help: "etcd's backend quota (--quota-backend-bytes) as the store is told it (--store-quota-bytes).",
		}),
		ChunksSwept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cast_store_orphan_chunks_swept_total", Help: "Chunk keys of append attempts that never committed, deleted by the sweep.",
		}),
		NoSpaceAlarm: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cast_store_nospace_alarm", Help: "1 while etcd's NOSPACE alarm is raised (the store is read-only).",
		}),
		NoSpaceRecoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cast_store_nospace_recoveries_total", Help: "Recoveries from etcd's NOSPACE alarm (compact, defragment, disarm) by outcome.",
		}, []string{"outcome"}),
		Reclaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cast_store_reclaims_total", Help: "Compactions and defragmentations run because etcd's file neared the quota, by outcome.",
		}, []string{"outcome"}),
	}
	register(reg, m.RequestSeconds, m.AppendedMessages, m.AppendBatchSize, m.TranscriptBytes,
		m.TxnConflicts, m.OwnerWritesRejected, m.QuotaRejections, m.DBSizeBytes, m.QuotaBytes, m.BackendQuotaBytes, m.ChunksSwept,
		m.NoSpaceAlarm, m.NoSpaceRecoveries, m.Reclaims)
	for _, o := range []string{"recovered", "failed"} {
		m.NoSpaceRecoveries.WithLabelValues(o) // exported at 0, so increase() sees the first
	}
	return m
}

// ControlPlane holds the control plane's fleet metrics.
type ControlPlane struct {
	NodesConnected   prometheus.Gauge
	ConnectStreams   prometheus.Gauge
	Heartbeats       prometheus.Counter
	HeartbeatExpired prometheus.Counter
	CommandsSent     *prometheus.CounterVec // kind
	BuildInfo        *prometheus.GaugeVec
}

// NewControlPlane creates and registers control plane metrics.
func NewControlPlane(reg prometheus.Registerer) *ControlPlane {
	m := &ControlPlane{
		NodesConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cast_controlplane_nodes_connected", Help: "Nodes whose liveness lease is held.",
		}),
		ConnectStreams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cast_controlplane_node_connect_streams", Help: "Open node Connect streams on this replica.",
		}),
		Heartbeats: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cast_controlplane_node_heartbeats_total", Help: "Node heartbeats received.",
		}),
		HeartbeatExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cast_controlplane_node_heartbeat_expired_total", Help: "Nodes marked down because their lease lapsed.",
		}),
		CommandsSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cast_controlplane_node_commands_total", Help: "Commands sent down node streams.",
		}, []string{"kind"}),
		BuildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cast_build_info", Help: "Build metadata; always 1.",
		}, []string{"version", "revision", "goversion", "capability_version"}),
	}
	register(reg, m.NodesConnected, m.ConnectStreams, m.Heartbeats, m.HeartbeatExpired, m.CommandsSent, m.BuildInfo)
	return m
}

func register(reg prometheus.Registerer, cs ...prometheus.Collector) {
	if reg == nil {
		return
	}
	for _, c := range cs {
		reg.MustRegister(c)
	}
}

// Migration holds the migration manager's metrics.
type Migration struct {
	Sessions     *prometheus.CounterVec   // outcome: succeeded, failed, cancelled
	PhaseSeconds *prometheus.HistogramVec // phase: fence, drain, worktree, commit
	Active       prometheus.Gauge
}

// NewMigration creates and registers migration metrics.
func NewMigration(reg prometheus.Registerer) *Migration {
	m := &Migration{
		Sessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cast_migration_sessions_total", Help: "Sessions whose migration ended, by outcome.",
		}, []string{"outcome"}),
		PhaseSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cast_migration_phase_seconds", Help: "Time a session spent in each migration phase.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"phase"}),
		Active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cast_migrations_active", Help: "Migrations running on this replica.",
		}),
	}
	register(reg, m.Sessions, m.PhaseSeconds, m.Active)
	// Exported at 0 before the first event: increase() sees a replica's
	// first failure, and CastMigrationStuck sees no phase progressing.
	for _, o := range MigrationOutcomes {
		m.Sessions.WithLabelValues(o)
	}
	for _, p := range MigrationPhases {
		m.PhaseSeconds.WithLabelValues(p)
	}
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
	Switches *prometheus.CounterVec // agent, reason: limit, manual, reset
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
	m := &Fleet{
		Switches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cast_account_switches_total", Help: "Activations of a fleet account, by agent and reason (limit, manual, reset).",
		}, []string{"agent", "reason"}),
		Limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cast_account_limits_total", Help: "Usage limits reported on fleet accounts, by agent.",
		}, []string{"agent"}),
		Accounts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cast_fleet_accounts", Help: "Fleet accounts by agent and state (open, limited), as of the last sweep.",
		}, []string{"agent", "state"}),
		UsagePercent: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cast_fleet_usage_percent", Help: "Used percentage of a fleet account's usage window as last reported, by agent, account and window.",
		}, []string{"agent", "account", "window"}),
		UsageResetSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cast_fleet_usage_reset_seconds", Help: "Seconds until a fleet account's usage window resets, by agent, account and window.",
		}, []string{"agent", "account", "window"}),
		UsageAgeSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cast_fleet_usage_age_seconds", Help: "How old a fleet account's usage figures are, by agent and account.",
		}, []string{"agent", "account"}),
	}
	register(reg, m.Switches, m.Limited, m.Accounts, m.UsagePercent, m.UsageResetSeconds, m.UsageAgeSeconds)
	return m
}

// Node holds a node daemon's metrics (node --metrics-listen). Labels are
// bounded: agent names and turn outcomes, never session ids.
type Node struct {
	Turns       *prometheus.CounterVec   // agent, outcome
	TurnSeconds *prometheus.HistogramVec // agent
	Running     prometheus.Gauge
}

// NewNode creates and registers node metrics.
func NewNode(reg prometheus.Registerer) *Node {
	m := &Node{
		Turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cast_node_turns_total", Help: "Agent turns this node ran, by agent and outcome (succeeded, or the runner's reason).",
		}, []string{"agent", "outcome"}),
		TurnSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cast_node_turn_duration_seconds", Help: "How long agent turns ran, by agent.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 12),
		}, []string{"agent"}),
		Running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cast_node_turns_running", Help: "Agent turns running now.",
		}),
	}
	register(reg, m.Turns, m.TurnSeconds, m.Running)
	return m
}
