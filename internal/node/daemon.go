package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/custody"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/keylock"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/tick"
	"github.com/cast-dev/cast/internal/transcript"
)

// Daemon is a running node daemon: its stream to the control plane, the
// sessions it owns and their turns.
type Daemon struct {
	cfg      Config
	lg       *zap.Logger
	st       *state
	cli      *client.Client
	cred     *client.Token    // this node's bearer credential (identity.go)
	id       *client.Identity // with TLS: its client certificate (certs.go)
	tls      *tls.Config      // nil: plaintext
	trust    *pki.Trust       // with TLS: the CAs it trusts (trust.go)
	bsync    *client.BundleSync
	rotate   chan struct{} // a renewed certificate: move the stream
	renewing sync.Mutex    // held during a renewal; a refused stream waits on it (certs.go)
	runner   *runner.Runner
	workers  workers
	setups   sync.WaitGroup // worktree setups running in the background
	// worktreeLocks serialises making each worktree (by path), so that
	// turns that come together make it once (worktrees.go).
	worktreeLocks keylock.Locks
	runCtx        context.Context // lives as long as Run; turns run under it
	migrations    migrationJobs
	// leaseTTL (ns) is what the control plane last said; lastContact (unix
	// ns) is when it was last heard from. Self-fencing compares them.
	leaseTTL    atomic.Int64
	lastContact atomic.Int64
	// msgLimit is the store's message size limit its last refusal said (0:
	// none did yet; msglimit.go).
	msgLimit atomic.Int64
	// batchLimit bounds the messages of one append or adoption below what
	// the control plane took (0: none was refused yet; msglimit.go).
	batchLimit atomic.Int64

	mcpSkips sync.Map      // agent+reason of each "no MCP server" warning logged
	recheck  chan struct{} // recheckAgents: look at the agents now (advertise.go)
	reg      *prometheus.Registry
	m        *metrics.Node
	// custody is token custody's node part (nil without --token-custody).
	custody    *custody.Node
	custodySvc custodyService
	// custodyMu orders a switch's supply against custodyLoop finishing a
	// switch that waited for a refresh (pending, by agent).
	custodyMu   sync.Mutex
	pending     map[string]*castv1.SetCredential
	custodyKick chan struct{}
	// probes is what probing the agents' CLIs said (nil without --probe).
	probes *probes
	// clis are the CLIs the node runs, which adoption leaves alone.
	clis castCLIs
	// catchUps are the sessions whose catch-up catchUpAgain retries, with
	// the newest assignment's last seq and owner token: one retry a
	// session, however many reconnects fail to read.
	catchUpMu sync.Mutex
	catchUps  map[string]catchUpTo
	// helloFrom is where the next hello's window of owned sessions starts,
	// for a node owning more than one hello may list (helloSessions).
	helloFrom atomic.Int64
	// markers indexes the done markers of imports (migration.go).
	markers importMarkers
}

// catchUpTo is what a catch-up reads up to, for the owner token it runs
// under.
type catchUpTo struct{ lastSeq, token int64 }

// New prepares a node daemon; Run starts it.
func New(cfg Config, lg *zap.Logger) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := loadState(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("node state in %s: %w", cfg.DataDir, err)
	}
	cred, err := loadCredential(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	var (
		id     *client.Identity
		trust  *pki.Trust
		tlsCfg *tls.Config
	)
	if cfg.CAPin != "" {
		if id, err = client.LoadIdentity(IdentityPath(cfg.DataDir)); err != nil {
			return nil, err
		}
		if trust, err = loadTrust(cfg, id); err != nil {
			return nil, err
		}
		tlsCfg = client.WithIdentity(trust.Config(), id)
	}
	if err := client.CheckPlaintext(cfg.ControlPlane, tlsCfg, cfg.Insecure); err != nil {
		return nil, err
	}
	a := &Daemon{cfg: cfg, cred: cred, id: id, trust: trust, tls: tlsCfg, rotate: make(chan struct{}, 1), lg: lg.Named("node").With(zap.String("node", cfg.Name)), st: st, runCtx: context.Background(),
		recheck: make(chan struct{}, 1), reg: prometheus.NewRegistry()}
	// The connection redials an unreachable control plane no less often
	// than the node's own retries: a call fails at once until a redial
	// gets through.
	o := client.Options{Token: cred, TLS: tlsCfg, RedialMax: cfg.ReconnectMax}
	if trust != nil {
		a.bsync = a.bundleSync()
		o.Bundle = a.bsync
	}
	if a.cli, err = client.DialOpts(cfg.ControlPlane, o); err != nil {
		return nil, err
	}
	a.m = newNodeMetrics(a.reg)
	metrics.SetBuildInfo(a.reg, CapabilityVersion)
	if id != nil {
		metrics.NewCertExpiry(a.reg, map[string]func() *x509.Certificate{metrics.CertClient: func() *x509.Certificate {
			if c := id.Cert(); c != nil {
				return c.Leaf
			}
			return nil
		}})
	}
	if tlsCfg == nil {
		a.lg.Warn("no --ca-pin: dialing the control plane in plaintext, which only a control plane started with --insecure answers")
	}
	a.runner = &runner.Runner{Bins: cfg.bins(), Logf: func(f string, args ...any) { a.lg.Debug(fmt.Sprintf(f, args...)) }}
	a.probes = newProbes() // probed on demand (`cast nodes --probe`) too
	if err := a.newCustody(); err != nil {
		return nil, err
	}
	return a, nil
}

// Run is New then Agent.Run.
func Run(ctx context.Context, cfg Config, lg *zap.Logger) error {
	a, err := New(cfg, lg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// background runs fn on a goroutine Run waits for before it returns, as it
// waits for the turns: work a command started (a migration's bundle, a
// workspace's git) stops with runCtx, and its last log lines and state
// writes come before the node is gone, never after (a test's logger
// raced with its test's end when they did).
func (a *Daemon) background(fn func()) {
	a.workers.wg.Add(1)
	go func() { defer a.workers.wg.Done(); fn() }()
}

// Run keeps a Connect stream up, reconnecting with jittered exponential
// backoff, until ctx ends.
func (a *Daemon) Run(ctx context.Context) error {
	defer a.cli.Close()
	ctx, cancel := context.WithCancel(ctx)
	a.runCtx = ctx
	defer a.workers.wg.Wait() // turns end (interrupted) before the node does
	defer a.setups.Wait()     // worktree setups stop with runCtx
	defer cancel()            // first: a refused credential stops the turns too
	stopMetrics, err := a.serveMetrics(ctx, a.reg)
	if err != nil {
		return err
	}
	defer stopMetrics()
	if err := a.join(ctx); err != nil {
		return err
	}
	// systemd's Type=notify (deploy/systemd): started once it holds its
	// credential; reconnecting later is the node's own business.
	_, _ = daemon.SdNotify(false, daemon.SdNotifyReady)
	defer daemon.SdNotify(false, daemon.SdNotifyStopping) //nolint:errcheck
	if a.id != nil && ctx.Err() == nil {
		go a.renewCerts(ctx)
		go a.followBundle(ctx)
	}
	a.stopOrphans()
	a.runKilledAgain()
	a.fleetNotice()
	a.startLoops(ctx)
	if err := a.stayConnected(ctx); err != nil {
		return err
	}
	a.lg.Info("node stopped")
	return nil
}

// startLoops starts the node's loops beside its stream; they end with ctx.
func (a *Daemon) startLoops(ctx context.Context) {
	go a.selfFence(ctx)
	go a.custodyLoop(ctx)
	go a.recordAgain(ctx)
	go a.sweepMigrationDir(ctx)
	if a.cfg.Adopt {
		go a.adoptLoop(ctx)
	}
	if a.cfg.AgentChecks {
		a.background(func() { a.checkAgents(ctx) }) // its CLIs are gone before the node is
	}
	if a.cfg.Probe {
		a.background(func() { a.probeAgents(ctx) }) // its CLIs are gone before the node is
	}
}

// handle applies one command to the node's state.
func (a *Daemon) handle(ctx context.Context, cmd *castv1.Command) error {
	switch k := cmd.Kind.(type) {
	case *castv1.Command_AssignSession:
		return a.assignSession(ctx, k.AssignSession)
	case *castv1.Command_DeliverMessages:
		d := k.DeliverMessages
		return a.deliver(d.SessionId, d.OwnerToken, d.Messages)
	case *castv1.Command_Interrupt:
		return a.interrupt(k.Interrupt.SessionId, k.Interrupt.Abandon, k.Interrupt.Agent)
	case *castv1.Command_ReleaseSession:
		a.release(k.ReleaseSession.SessionId, k.ReleaseSession.Owner)
		return nil
	case *castv1.Command_ExportWorkTree:
		a.background(func() { a.exportWorkTree(a.runCtx, k.ExportWorkTree) }) // long: answered by upload or report
		return nil
	case *castv1.Command_ImportWorkTree:
		a.background(func() { a.importWorkTree(a.runCtx, k.ImportWorkTree) })
		return nil
	case *castv1.Command_Workspace:
		a.background(func() { a.workspaceRequest(a.runCtx, k.Workspace) }) // git may take a while: answered by ReportWorkspace
		return nil
	case *castv1.Command_SetCredential:
		// In line: a message delivered after it must run on the new
		// credential.
		return a.setCredential(ctx, k.SetCredential)
	default:
		return fmt.Errorf("unknown command")
	}
}

// commandKinds are the kind label of cast_node_commands_total: the names
// of Command's kind fields (assign_session, deliver_messages, ...), read
// from the proto, so a new command is counted without a list to extend.
func commandKinds() []string {
	fields := commandKindOneof.Fields()
	kinds := make([]string, 0, fields.Len()+1)
	for i := range fields.Len() {
		kinds = append(kinds, string(fields.Get(i).Name()))
	}
	return append(kinds, "unknown")
}

// commandKindOneof is Command's kind oneof, looked up once.
var commandKindOneof = (&castv1.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("kind")

// commandKind is cmd's kind label.
func commandKind(cmd *castv1.Command) string {
	if f := cmd.ProtoReflect().WhichOneof(commandKindOneof); f != nil {
		return string(f.Name())
	}
	return "unknown"
}

// catchUp pulls user messages the node has not seen (sent while it was
// away: delivery is at-least-once, the node makes it exactly-once).
func (a *Daemon) catchUp(ctx context.Context, sessionID string, lastSeq, token int64) error {
	o, _ := a.st.get(sessionID)
	if lastSeq <= o.ReceivedSeq {
		a.wake(sessionID) // a restart may have left accepted-but-unrun work
		return nil
	}
	// Every page: a long turn (or a move's drain) leaves hundreds of agent
	// rows before the user messages to catch up on.
	var users []*castv1.Message
	err := a.cli.EachMessage(ctx, 0, &castv1.ListMessagesRequest{SessionId: sessionID, StartSeq: o.ReceivedSeq + 1, EndSeq: lastSeq}, func(m *castv1.Message) error {
		switch {
		case m.Kind == castv1.MessageKind_MESSAGE_KIND_USER:
			users = append(users, m)
		case m.Kind == castv1.MessageKind_MESSAGE_KIND_NOTICE && m.NoticeType == transcript.NoticeMigration && m.Seq > o.NoticeSeq:
			// The session just moved here: the next turn tells the agent.
			return a.st.session(sessionID, func(o *owned) { o.Notice, o.NoticeSeq = m.Text, m.Seq })
		}
		return nil
	})
	if err != nil {
		return err
	}
	return a.deliver(sessionID, token, users)
}

// retryCatchUp has catchUpAgain retry the session's failed catch-up up to
// lastSeq, starting it unless one runs already (which then reads up to
// the newer lastSeq, under the newer token).
func (a *Daemon) retryCatchUp(sessionID string, lastSeq, token int64) {
	a.catchUpMu.Lock()
	defer a.catchUpMu.Unlock()
	if a.catchUps == nil {
		a.catchUps = map[string]catchUpTo{}
	}
	to, running := a.catchUps[sessionID]
	a.catchUps[sessionID] = catchUpTo{lastSeq: max(to.lastSeq, lastSeq), token: max(to.token, token)}
	if !running {
		a.background(func() { a.catchUpAgain(sessionID) })
	}
}

// catchUpAgain retries a catch-up that failed, at the reconnect pace,
// until it succeeds, the session is no longer owned with the token
// (released, or assigned anew: that assignment catches up itself), the
// control plane refuses it for good, or the node stops.
func (a *Daemon) catchUpAgain(sessionID string) {
	// done ends the retry of to, unless an assignment asked for a newer
	// one meanwhile.
	done := func(to catchUpTo) bool {
		a.catchUpMu.Lock()
		defer a.catchUpMu.Unlock()
		if a.catchUps[sessionID] != to && a.runCtx.Err() == nil {
			return false
		}
		delete(a.catchUps, sessionID)
		return true
	}
	pauses := retry.Reconnect(a.cfg.ReconnectMin, a.cfg.ReconnectMax).Pauses()
	for {
		tick.Sleep(a.runCtx, pauses.Next())
		a.catchUpMu.Lock()
		to := a.catchUps[sessionID]
		a.catchUpMu.Unlock()
		if o, ok := a.st.get(sessionID); a.runCtx.Err() != nil || !ok || o.Token != to.token {
			if done(to) {
				return
			}
			continue
		}
		err := a.catchUp(a.runCtx, sessionID, to.lastSeq, to.token)
		if err != nil && a.runCtx.Err() == nil && !refusedForGood(err) && client.ReasonOf(err) != "NOT_OWNER" {
			a.lg.Warn("catch-up of a session failed; trying again", zap.String("session", sessionID), zap.Error(err))
			continue
		}
		if done(to) {
			return
		}
	}
}

// deliver records user messages as received and wakes the session's
// worker, which hands them to the agent in order, each exactly once.
func (a *Daemon) deliver(sessionID string, token int64, msgs []*castv1.Message) error {
	o, ok := a.st.get(sessionID)
	if !ok || token < o.Token {
		return fmt.Errorf("session %s is not owned by this node with token %d", sessionID, token)
	}
	var newest int64
	var newestID string
	for _, m := range msgs {
		if m.Seq > o.ReceivedSeq && !ids.History(m.ClientId) { // adopted or synced rows are history, never prompts
			if m.Seq > newest {
				newest, newestID = m.Seq, m.ClientId
			}
			a.lg.Info("user message received", zap.String("session", sessionID), zap.Int64("seq", m.Seq))
		}
	}
	if newest > 0 {
		err := a.st.session(sessionID, func(o *owned) {
			if newest > o.ReceivedSeq {
				o.ReceivedSeq, o.ReceivedID = newest, newestID
			}
		})
		if err != nil {
			// Nothing is lost: the control plane keeps the messages and
			// recordAgain runs them once a write succeeds.
			a.showUnrecorded(sessionID, err)
			return err
		}
	}
	a.wake(sessionID)
	return nil
}

// showUnrecorded tells the control plane that the session's messages wait
// because the node cannot write its state (err), so the session says why.
// Sent once, not kept: the state cannot be written now.
func (a *Daemon) showUnrecorded(sessionID string, err error) {
	ctx, cancel := context.WithTimeout(a.runCtx, 10*time.Second)
	defer cancel()
	_ = a.sendReport(ctx, sessionID, turnReport{State: castv1.SessionState_SESSION_STATE_FAILED, Reason: a.unrecordedReason(err), ExitCode: -1})
}

// unrecordedReason says why the node cannot take messages now.
func (a *Daemon) unrecordedReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // "no space left on device", without a temp file's name
	}
	return fmt.Sprintf("node %s cannot write its state in %s (%v); its messages wait until it can", a.cfg.Name, a.cfg.DataDir, err)
}

// recordAgain retries a state write that failed (a full disk) until one
// succeeds, then wakes every session: turns were held meanwhile, since a
// turn the node cannot record as delivered could run twice after a
// restart.
func (a *Daemon) recordAgain(ctx context.Context) {
	tick.Every(ctx, 500*time.Millisecond, func() bool {
		if now, err := a.st.catchUp(); err == nil && now {
			a.lg.Info("node state written again; resuming held sessions")
			for _, id := range a.st.ids() {
				a.wake(id)
			}
		}
		return true
	})
}

// interrupt stops the session's running turn, or the one about to start,
// if there is one; a switch's names the agent it switched from (agent),
// and stops only a turn of that agent (workers.interrupt).
func (a *Daemon) interrupt(sessionID string, abandon bool, agent string) error {
	a.lg.Info("interrupt requested", zap.String("session", sessionID), zap.Bool("abandon", abandon), zap.String("agent", agent))
	queued := func() bool {
		o, ok := a.st.get(sessionID)
		return ok && o.ReceivedSeq > o.DeliveredSeq && o.ReceivedSeq > o.FailedSeq
	}
	if !a.workers.interrupt(sessionID, abandon, agent, queued) {
		if agent != "" {
			return fmt.Errorf("session %s has no turn of %s running on this node", sessionID, agent)
		}
		return fmt.Errorf("session %s has no running turn on this node", sessionID)
	}
	return nil
}
