// Package store is cast's state in etcd; every core reaches etcd through
// it, speaking the vocabulary of internal/fence. Besides store only the
// embedded server (etcdembed) and the test harness import etcd's packages;
// token custody's record lives here too (vault.go).
//
// Key schema (all under Config.Prefix, default "/cast/v1/"):
//
//	sessions/{s}          castv1.Session record
//	seqs/{s}              last assigned seq (decimal); exists iff the session does;
//	                      an archive rewrites it (same value) to fail appends in flight
//	msgs/{s}/{seq:020d}   message envelope (inline proto, or a pointer to blobs)
//	chunks/{s}/{cid}/{a}/{i} chunks of a large message, unique to append attempt a,
//	                      written before its envelope and never again
//	blobs/{s}/{cid}/{i}   chunks from before attempts (read, never written)
//	segs/{s}/{last:020d}  index entry of a segment of the session's history in
//	                      the object store: seqs, sizes, digest (tier.go)
//	cids/{s}/{cid}        seq, body digest, create time and chunk attempt of a
//	                      client id (idempotent appends; see cidRecord)
//	owners/{s}            owner node name; its ModRevision is the fencing token
//	nodesessions/{n}/{s}  index: sessions owned by node n
//	unowned/{s}           index: sessions stored while no node was connected
//	ops/{s}/{op}          an operation asked of the session's owner (leased)
//	perms/{s}/{rid}       a permission request and its answer
//	reqids/{rid}          session id created for a request id
//	nodes/{n}             castv1.Node record
//	nodeconn/{n}          liveness, bound to the node's lease
//	nodeseen/{n}          last recorded heartbeat, kept when the node goes down
//	nodelabels/{n}        the node's admin labels (`cast node label`)
//	fences/{s}            migration id; present iff a migration fences s
//	migrations/{m}        castv1.Migration header (sessions in migsessions/)
//	migsessions/{m}/{s}   castv1.MigrationSession: one session's progress
//	migrated/{s}/{n}      node the last committed migration from n moved s to
//	migrunners/{m}        the replica running migration m (leased)
//	nodecmds/{n}/{id}     castv1.Command for node n (leased), relayed by the
//	                      replica holding n's stream
//	worktrees/{m}/{s}/... a migrating session's work tree bundle, in chunks
//	wsanswers/{n}/{rid}   node n's answer to a workspace request (leased)
//	accounts/{a}/{name}   fleet account of agent a (credential sealed)
//	activeaccounts/{a}    the account agent a's shared credential store holds
//	credgrants/{n}/{h}    one-time grant (by hash) for node n to fetch a credential
//	accountchoices/{a}    a pending account choice of agent a (the ask policy)
//	fleetreservations/{a}/{s} the account a running fleet turn reserved (leased)
//	agentchecks/{a}/{v}/{c} canary verdict per agent, CLI version and capability
//	certissues/{c}/{pin}  the latest certificate issued to credential c
//	authtokens/ authnames/ authnodes/ jointokens/ authbootstrap tlsca
//	                      credentials (by hash) and the TLS CA (see auth.go)
//	custody/...           token custody's record (vault.go)
//	webcodes/ websessions/ weboidcflows/
//	                      the web timeline's sign-in grants, leased (webgrants.go)
//
// Sessions, their owner index and messages live under different top-level
// prefixes so listing one never ranges over the others.
package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/tick"
	"github.com/cast-dev/cast/internal/transcript"
)

// Defaults.
const (
	DefaultPrefix          = "/cast/v1/"
	DefaultQuotaBytes      = 2 << 30 // etcd's default backend quota
	DefaultQuotaReserve    = 0.05    // refuse writes this close to the quota
	DefaultChunkBytes      = 256 << 10
	DefaultMaxMessageBytes = transcript.DefaultMaxMessageBytes
	DefaultMaxBatchBytes   = 1 << 20 // well under etcd's 1.5 MiB request limit
	DefaultMaxBatchMsgs    = 50      // 2 ops per message + 1, under etcd's 128 ops
	// DefaultMaxTxnOps is etcd's --max-txn-ops default: etcd refuses a txn
	// with more compares, more then-ops or more else-ops than this. A group
	// commit round (sessions sharing one txn) stays within it; set it to the
	// etcd's own value when that was raised.
	DefaultMaxTxnOps = 128
	// DefaultCommitRounds is how many group commit rounds (txns of appends
	// to different sessions) may be in flight at once: while one waits for
	// etcd's fsync the next fills, and etcd writes both with one fsync. A
	// round beyond the first starts only with CommitRoundFill appends
	// queued (commit.go), so rounds stay full.
	DefaultCommitRounds = 2
	// DefaultPageBytes bounds the messages of one page (ListMessages,
	// ExportSession): a page stops before the message that would pass it,
	// but always holds one, so a reply is at most
	// max(PageBytes, MaxMessageBytes) plus PageSlack.
	DefaultPageBytes = 16 << 20
	// PageSlack covers what a reply adds to its messages' bytes.
	PageSlack        = 1 << 20
	DefaultOpTimeout = 10 * time.Second
	// An append writes its chunks and commits within seconds; an attempt
	// untouched for the grace period has failed or been abandoned.
	DefaultSweepEvery = time.Minute
	DefaultSweepGrace = 10 * time.Minute
)

// Config tunes the store.
type Config struct {
	Prefix          string
	QuotaBytes      int64   // the etcd backend quota the store stays under
	QuotaReserve    float64 // fraction of QuotaBytes kept free
	ChunkBytes      int     // a message larger than this is chunked
	MaxMessageBytes int     // larger messages are refused
	MaxBatchBytes   int
	MaxBatchMsgs    int
	MaxTxnOps       int // etcd's --max-txn-ops (see DefaultMaxTxnOps)
	CommitRounds    int // group commit rounds in flight at once (see DefaultCommitRounds)
	CommitRoundFill int // appends queued before a round beyond the first starts (0: a third of MaxTxnOps/3)
	PageBytes       int // bytes of messages in one page (see DefaultPageBytes)
	QuotaPoll       time.Duration
	SweepEvery      time.Duration // how often orphan chunks are swept
	SweepGrace      time.Duration // an attempt this old without a commit is an orphan
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Prefix:          DefaultPrefix,
		QuotaBytes:      DefaultQuotaBytes,
		QuotaReserve:    DefaultQuotaReserve,
		ChunkBytes:      DefaultChunkBytes,
		MaxMessageBytes: DefaultMaxMessageBytes,
		MaxBatchBytes:   DefaultMaxBatchBytes,
		MaxBatchMsgs:    DefaultMaxBatchMsgs,
		MaxTxnOps:       DefaultMaxTxnOps,
		CommitRounds:    DefaultCommitRounds,
		PageBytes:       DefaultPageBytes,
		QuotaPoll:       2 * time.Second,
		SweepEvery:      DefaultSweepEvery,
		SweepGrace:      DefaultSweepGrace,
	}
}

// Validate checks c.
func (c Config) Validate() error {
	switch {
	case !strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/"):
		return fmt.Errorf("store: prefix %q must start and end with /", c.Prefix)
	case c.QuotaBytes <= 0:
		return fmt.Errorf("store: quota must be positive")
	case c.QuotaReserve < 0 || c.QuotaReserve >= 1:
		return fmt.Errorf("store: quota reserve must be in [0,1)")
	case c.ChunkBytes < 1024 || c.ChunkBytes > 1<<20:
		return fmt.Errorf("store: chunk size must be in [1KiB,1MiB]")
	case c.MaxMessageBytes < c.ChunkBytes:
		return fmt.Errorf("store: max message size below chunk size")
	case c.MaxBatchBytes < c.ChunkBytes || c.MaxBatchBytes > 1400<<10:
		return fmt.Errorf("store: batch bytes must be in [chunk,1.4MiB]")
	case c.MaxBatchMsgs < 1 || c.MaxBatchMsgs > 60:
		return fmt.Errorf("store: batch messages must be in [1,60]")
	case c.MaxTxnOps < 2*c.MaxBatchMsgs+3:
		// One session's batch of MaxBatchMsgs chunked messages reads and
		// compares 2 keys per message, and up to 3 of the session.
		return fmt.Errorf("store: max txn ops below twice the batch messages plus 3")
	case c.CommitRounds < 1:
		return fmt.Errorf("store: commit rounds must be at least 1")
	case c.PageBytes < c.ChunkBytes:
		return fmt.Errorf("store: page bytes below chunk size")
	case c.QuotaPoll <= 0:
		return fmt.Errorf("store: quota poll interval must be positive")
	case c.SweepEvery <= 0 || c.SweepGrace < time.Second:
		return fmt.Errorf("store: sweep interval must be positive and the grace at least a second")
	}
	return nil
}

// Store is cast's state over one etcd client.
type Store struct {
	cli *clientv3.Client
	cfg Config
	lg  *zap.Logger
	m   *metrics.Store

	quota      quotaGuard
	sweep      sweeper
	alarm      alarmState // Run's goroutine only
	ownsClient bool

	commit *committer // group commit of appends across sessions

	objs Objects  // history beyond etcd (nil: none; tier.go)
	tier *tiering // the tiering policy and state (nil: off)
	segs segCache // segments read lately

	// watchGen picks the clientv3 watch stream of new watches; a watch
	// etcd canceled moves it on (follow.go).
	watchGen atomic.Int64

	afterChunks func() // test hook: runs between an append's chunks and its commit
	beforeTxn   func() // test hook: runs between a round's reads and its write txn
}

// Open dials etcd at endpoints with a's TLS and auth and returns a Store
// that owns the client.
func Open(ctx context.Context, endpoints []string, a Access, cfg Config, m *metrics.Store, lg *zap.Logger) (*Store, error) {
	ccfg, err := a.clientConfig(endpoints, lg)
	if err != nil {
		return nil, err
	}
	if ccfg.TLS != nil {
		if err := probeTLS(ctx, endpoints, ccfg.TLS); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	cli, err := clientv3.New(ccfg)
	if err != nil {
		return nil, fmt.Errorf("store: dial etcd: %w", dialError(err, a))
	}
	s, err := New(ctx, cli, cfg, m, lg)
	if err != nil {
		cli.Close()
		return nil, dialError(err, a)
	}
	s.ownsClient = true
	return s, nil
}

// Close releases the etcd client when the Store dialed it.
func (s *Store) Close() error {
	if s.ownsClient {
		return s.cli.Close()
	}
	return nil
}

// New returns a Store over cli; the caller keeps ownership of cli.
func New(ctx context.Context, cli *clientv3.Client, cfg Config, m *metrics.Store, lg *zap.Logger) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if m == nil {
		m = metrics.NewStore(nil)
	}
	s := &Store{cli: cli, cfg: cfg, lg: lg.Named("store"), m: m, commit: newCommitter(), alarm: newAlarmState()}
	s.quota.init(cfg)
	if err := s.refreshQuota(ctx); err != nil {
		return nil, fmt.Errorf("store: first status read: %w", err)
	}
	return s, nil
}

// Run polls etcd's db size until ctx ends, so the quota check stays fresh,
// recovers from etcd's NOSPACE alarm, and sweeps orphan chunks.
func (s *Store) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { defer wg.Done(); s.runSweeper(ctx) }()
	if s.tier != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.runTiering(ctx) }()
	}
	tick.Every(ctx, s.cfg.QuotaPoll, func() bool {
		if err := s.refreshQuota(ctx); err != nil && ctx.Err() == nil {
			s.lg.Warn("quota refresh failed", zap.Error(err))
		}
		s.checkAlarms(ctx)
		return true
	})
}

// Ready reports whether etcd answers a linearizable read.
func (s *Store) Ready(ctx context.Context) error {
	_, err := s.cli.Get(ctx, s.key("health"), clientv3.WithCountOnly())
	return err
}

func (s *Store) key(parts ...string) string { return s.cfg.Prefix + strings.Join(parts, "/") }

// agentPrefix is the key prefix of kind's records of one agent, or of
// every agent's when agent is "" (a listing's filter).
func (s *Store) agentPrefix(kind, agent string) string {
	if agent == "" {
		return s.key(kind) + "/"
	}
	return s.key(kind, agent) + "/"
}

func seqKeyPart(seq int64) string { return fmt.Sprintf("%020d", seq) }

func (s *Store) sessionKey(id string) string        { return s.key("sessions", id) }
func (s *Store) seqKey(id string) string            { return s.key("seqs", id) }
func (s *Store) ownerKey(id string) string          { return s.key("owners", id) }
func (s *Store) msgPrefix(id string) string         { return s.key("msgs", id) + "/" }
func (s *Store) msgKey(id string, seq int64) string { return s.msgPrefix(id) + seqKeyPart(seq) }
func (s *Store) cidKey(id, cid string) string       { return s.key("cids", id, cid) }
func (s *Store) blobPrefix(id, cid string) string   { return s.key("blobs", id, cid) + "/" }
func (s *Store) nodeKey(n string) string            { return s.key("nodes", n) }
func (s *Store) connKey(n string) string            { return s.key("nodeconn", n) }
func (s *Store) nodeConnPrefix() string             { return s.key("nodeconn") + "/" }
func (s *Store) seenKey(n string) string            { return s.key("nodeseen", n) }
func (s *Store) requestKey(rk string) string        { return s.key("reqids", rk) }
func (s *Store) fenceKey(id string) string          { return s.key("fences", id) }
func (s *Store) migrationKey(m string) string       { return s.key("migrations", m) }
func (s *Store) migSessKey(m, id string) string     { return s.key("migsessions", m, id) }
func (s *Store) migratedKey(id, from string) string { return s.key("migrated", id, from) }
func (s *Store) migRunnerKey(m string) string       { return s.key("migrunners", m) }
func (s *Store) nodeCmdKey(n, id string) string     { return s.key("nodecmds", n, id) }
func (s *Store) wsAnswerKey(n, id string) string    { return s.key("wsanswers", n, id) }
func (s *Store) workTreeKey(m, id string, part ...string) string {
	return s.key(append([]string{"worktrees", m, id}, part...)...)
}

// nodeSessKey is node n's index entry for session id; an unowned session
// (n "": an import stored while no node was connected) is indexed under
// unowned/, where the first node to connect adopts it (AdoptUnowned).
func (s *Store) nodeSessKey(n, id string) string {
	if n == "" {
		return s.key("unowned", id)
	}
	return s.key("nodesessions", n, id)
}

func parseInt(b []byte) (int64, error) { return strconv.ParseInt(string(b), 10, 64) }
