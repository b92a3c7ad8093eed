package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/tick"
)

// Token custody on the node (--token-custody; docs/token-custody.md): the
// agent's shared store gets the active account's access token only, and
// the node the control plane elects custodian refreshes the login through
// the agent's CLI in DATA_DIR/custody (Codex: `codex app-server`; Claude:
// `claude mcp list`). Agents without a CLI refresher keep the copied
// credential of fleet accounts.

// custodyService is the control plane's Custody RPC as custody.Service.
type custodyService struct {
	cli  castv1.NodeServiceClient
	node string
}

func (c custodyService) call(ctx context.Context, op castv1.CustodyOp, agent, account string, cred []byte, issued time.Time) (*castv1.CustodyResponse, error) {
	req := &castv1.CustodyRequest{Node: c.node, Agent: agent, Account: account, Op: op, Credential: cred}
	if !issued.IsZero() {
		// Both: issued for control planes older than issue_time (AIP-142).
		req.Issued, req.IssueTime = timestamppb.New(issued), timestamppb.New(issued)
	}
	resp, err := c.cli.Custody(ctx, req)
	switch r := client.ReasonOf(err); r {
	case custody.ReasonNotNewer:
		return nil, custody.ErrNotNewer
	// Typed again, so custody and setCredential tell them apart; each
	// reason keeps the kind the control plane gave it.
	case custody.ReasonNotInCustody:
		return nil, &errs.Error{Kind: errs.KindNotFound, Reason: custody.ReasonNotInCustody, Msg: "custody does not hold this account", Err: err}
	case custody.ReasonOff:
		return nil, &errs.Error{Kind: errs.KindFailedPrecondition, Reason: custody.ReasonOff, Msg: "custody does not hold this account", Err: err}
	}
	return resp, err
}

func (c custodyService) fetch(ctx context.Context, op castv1.CustodyOp, agent, account string) ([]byte, custody.Token, error) {
	resp, err := c.call(ctx, op, agent, account, nil, time.Time{})
	if err != nil {
		return nil, custody.Token{}, err
	}
	tok, err := agents.ParseCredential(agent, resp.Credential)
	return resp.Credential, tok, err
}

func (c custodyService) Get(ctx context.Context, agent, account string) ([]byte, custody.Token, error) {
	return c.fetch(ctx, castv1.CustodyOp_CUSTODY_OP_GET, agent, account)
}

func (c custodyService) AccessOnly(ctx context.Context, agent, account string) ([]byte, custody.Token, error) {
	return c.fetch(ctx, castv1.CustodyOp_CUSTODY_OP_ACCESS, agent, account)
}

func (c custodyService) Put(ctx context.Context, agent, account string, raw []byte, _ string) (custody.Token, error) {
	if _, err := c.call(ctx, castv1.CustodyOp_CUSTODY_OP_PUT, agent, account, raw, time.Time{}); err != nil {
		return custody.Token{}, err
	}
	return agents.ParseCredential(agent, raw)
}

func (c custodyService) BeginRefresh(ctx context.Context, agent, account, _ string, issued time.Time) error {
	_, err := c.call(ctx, castv1.CustodyOp_CUSTODY_OP_BEGIN_REFRESH, agent, account, nil, issued)
	return err
}

func (c custodyService) EndRefresh(ctx context.Context, agent, account, _ string) error {
	_, err := c.call(ctx, castv1.CustodyOp_CUSTODY_OP_END_REFRESH, agent, account, nil, time.Time{})
	return err
}

func (c custodyService) elect(ctx context.Context, agent, account string) (string, error) {
	resp, err := c.call(ctx, castv1.CustodyOp_CUSTODY_OP_ELECT, agent, account, nil, time.Time{})
	if err != nil {
		return "", err
	}
	return resp.Custodian, nil
}

// custodyRefresher runs each agent's CLI refresher with the environment
// and folder its turns get.
type custodyRefresher struct{ cfg Config }

func (r custodyRefresher) Refresh(ctx context.Context, agent, path string) error {
	ref, err := r.cfg.custodyRefresher(agent)
	if err != nil {
		return err
	}
	return ref.Refresh(ctx, agent, path)
}

func (c Config) custodyRefresher(agent string) (custody.Refresher, error) {
	s := c.agentSetup(agent)
	t := c.newTurn(agent, s, s.Env)
	return agents.RefresherFor(agent, agents.RefresherOptions{Bin: s.Bin, Env: t.Environ(), Home: t.AgentDir()})
}

// custodyCovers says whether agent's fleet accounts go through custody on
// this node.
func (a *Daemon) custodyCovers(agent string) bool {
	if a.custody == nil {
		return false
	}
	_, err := a.cfg.custodyRefresher(agent)
	return err == nil
}

// newCustody builds the node's custody part when --token-custody is on.
func (a *Daemon) newCustody() error {
	// A switch waiting for its copy uses these with custody off too.
	a.pending, a.custodyKick = map[string]*castv1.SetCredential{}, make(chan struct{}, 1)
	if !a.cfg.TokenCustody {
		return nil
	}
	svc := custodyService{cli: a.cli.Nodes, node: a.cfg.Name}
	n, err := custody.NewNode(custody.NodeConfig{Name: a.cfg.Name, Dir: filepath.Join(a.cfg.DataDir, "custody"), Margin: a.cfg.CustodyMargin},
		svc, agents.CredentialFor, custodyRefresher{cfg: a.cfg}, a.lg.Named("custody"))
	if err != nil {
		return err
	}
	a.custody, a.custodySvc = n, svc
	return nil
}

// waitForRefresh defers a switch to an account whose access token ran out
// while it was inactive (custody refreshes only the active account):
// custodyLoop takes that account through custody now (refreshing it if
// this node is elected custodian, else supplying what the custodian
// stores) and records the switch once its store has a live token. The
// caller holds custodyMu.
func (a *Daemon) waitForRefresh(sc *castv1.SetCredential) {
	a.lg.Info("custody: the account's access token expired while it was inactive; switching once custody has refreshed it",
		zap.String("agent", sc.Agent), zap.String("account", sc.Account))
	a.waitForCustody(sc)
}

// waitForCustody leaves sc's switch to custodyLoop, which records it once
// its store has a live token. The caller holds custodyMu.
func (a *Daemon) waitForCustody(sc *castv1.SetCredential) {
	a.pending[sc.Agent] = sc
	select {
	case a.custodyKick <- struct{}{}:
	default:
	}
}

// custodyAccount is the account custody keeps for agent: a switch waiting
// for its refresh, else the one the store holds.
func (a *Daemon) custodyAccount(agent string) string {
	a.custodyMu.Lock()
	defer a.custodyMu.Unlock()
	return a.custodyAccountLocked(agent)
}

func (a *Daemon) custodyAccountLocked(agent string) string {
	if p := a.pending[agent]; p != nil {
		return p.Account
	}
	return a.st.fleet(agent).Account
}

// finishSwitch records a switch that waited for account's refresh, now
// that its store holds a live token. The caller holds custodyMu.
func (a *Daemon) finishSwitch(agent, account string) {
	p := a.pending[agent]
	if p == nil || p.Account != account {
		return
	}
	delete(a.pending, agent)
	if p.Epoch <= a.st.fleet(agent).Epoch {
		return
	}
	if err := a.credentialWritten(p); err != nil {
		a.lg.Warn("custody: recording the switch failed", zap.String("agent", agent), zap.String("account", account), zap.Error(err))
	}
}

// copyWaiting makes a switch that waits for custody (its supply or copy
// failed for now) to an account custody turns out not to hold: its stored
// credential is copied, as setCredential copies one. A copy that fails for
// now waits for the next round.
func (a *Daemon) copyWaiting(ctx context.Context, agent, account string) {
	a.custodyMu.Lock()
	defer a.custodyMu.Unlock()
	p := a.pending[agent]
	if p == nil || p.Account != account {
		return
	}
	delete(a.pending, agent)
	path, err := a.cfg.credentialPath(agent)
	if err == nil {
		err = a.copyCredential(ctx, p, path)
	}
	if err == nil {
		return
	}
	again := custodyAgain(err)
	if again {
		// Kept for the next round (not kicked: the control plane is not
		// answering, and a kick would only ask it again at once).
		a.pending[agent] = p
	}
	a.lg.Warn("custody: copying the stored credential of a switch custody does not hold failed",
		zap.String("agent", agent), zap.String("account", account), zap.Bool("tried_again", again), zap.Error(err))
}

// supply writes the active account's access token into the agent's store.
func (a *Daemon) supply(ctx context.Context, agent, account string) error {
	path, err := a.cfg.credentialPath(agent)
	if err != nil {
		return err
	}
	if err := a.cfg.checkCredentialStore(agent, path); err != nil {
		return err
	}
	if !a.cfg.ownsCredential(path) && holdsLogin(agent, path) {
		// The user's own login, about to be replaced: kept as before. What
		// custody supplies has no refresh token and is not backed up.
		saved, err := backupCredential(path, nil, filepath.Join(a.cfg.credentialBackupDir(), agent))
		if err != nil {
			return fmt.Errorf("back up %s before replacing it: %w", path, err)
		}
		a.logBackup(agent, path, saved)
	}
	_, err = a.custody.Supply(ctx, agent, account, path)
	return err
}

// custodyLoop keeps each covered agent's active account in custody: it
// asks to be custodian (the control plane elects one live node), refreshes
// through the CLI when this node is, and supplies the newest access token
// to the agent's store before the old one expires. For agents custody
// does not cover (all of them with custody off) it copies a switch whose
// copy failed for now (copyWaiting).
func (a *Daemon) custodyLoop(ctx context.Context) {
	every := a.cfg.CustodyInterval
	if every <= 0 {
		every = time.Minute
	}
	reconciled := a.custody == nil
	tick.Loop{Every: every, First: true, Wake: a.custodyKick}.Run(ctx, func() bool {
		if !reconciled {
			reconciled = a.reconcileCustody(ctx)
		}
		for _, agent := range agents.FleetAgents() {
			acc := a.custodyAccount(agent)
			switch {
			case acc == "":
			case a.custodyCovers(agent):
				a.custodyTick(ctx, agent, acc)
			default:
				cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				a.copyWaiting(cctx, agent, acc)
				cancel()
			}
		}
		return true
	})
}

func (a *Daemon) custodyTick(ctx context.Context, agent, account string) {
	lg := a.lg.With(zap.String("agent", agent), zap.String("account", account))
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, _, err := a.custodySvc.AccessOnly(cctx, agent, account); errs.HasReason(err, custody.ReasonNotInCustody) || errs.HasReason(err, custody.ReasonOff) {
		a.copyWaiting(cctx, agent, account)
		return // its stored file was copied (setCredential)
	}
	who, err := a.custodySvc.elect(cctx, agent, account)
	switch {
	case client.ReasonOf(err) == custody.ReasonNotMarked:
		// Not marked to hold logins: this node only takes the access
		// token the custodian keeps fresh.
		lg.Debug("custody: not a custodian node", zap.Error(err))
	case err != nil:
		lg.Warn("custody: election failed", zap.Error(err))
		return
	}
	if who == a.cfg.Name {
		if _, err := a.custody.Custody(cctx, agent, account); err != nil {
			lg.Warn("custody: refresh failed", zap.Error(err))
		}
	}
	// Under custodyMu: a switch handled meanwhile must not have its store
	// overwritten with this account's token.
	a.custodyMu.Lock()
	defer a.custodyMu.Unlock()
	if a.custodyAccountLocked(agent) != account {
		return
	}
	if err := a.supply(cctx, agent, account); err != nil {
		lg.Warn("custody: supplying the access token failed", zap.Error(err))
		return
	}
	a.finishSwitch(agent, account)
}

// reconcileCustody reports what an earlier run left in DATA_DIR/custody
// (a refresh cut off before it was stored). It returns false when a report
// must be tried again: the control plane refused it because this node's
// stream is not welcomed yet (the loop starts beside it) or was not
// reached. A report never made leaves this node's refresh record in
// place, and while another node is custodian nothing else reports it
// (only a refresh does, first): no node could refresh that login again.
func (a *Daemon) reconcileCustody(ctx context.Context) bool {
	root := filepath.Join(a.cfg.DataDir, "custody")
	agentsDirs, _ := os.ReadDir(root)
	done := true
	for _, ad := range agentsDirs {
		accs, _ := os.ReadDir(filepath.Join(root, ad.Name()))
		for _, acc := range accs {
			err := a.custody.Reconcile(ctx, ad.Name(), acc.Name())
			if err == nil {
				continue
			}
			again := custodyAgain(err)
			done = done && !again
			a.lg.Warn("custody: reporting a credential left by an earlier run failed",
				zap.String("agent", ad.Name()), zap.String("account", acc.Name()), zap.Bool("tried_again", again), zap.Error(err))
		}
	}
	return done
}

// custodyAgain says whether a custody call failed only for now: a
// transient failure, or the control plane does not take this node as
// connected yet.
func custodyAgain(err error) bool {
	return transient(err) || client.ReasonOf(err) == errs.ReasonNodeNotConn
}

// holdsLogin says whether the store at path holds a login with a refresh
// token (not what custody supplied).
func holdsLogin(agent, path string) bool {
	raw, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	tok, err := agents.ParseCredential(agent, raw)
	return err == nil && tok.HasRefresh
}

// custodyQueued is the custody hook: the turn runs on the fleet account
// custody keeps in the agent's shared store as it starts (none when the
// session brings its own account). The start report names it, so the
// control plane's ledger reserves on it; the native hook rebuilds a native
// session another account wrote, and the end report and the native
// session record it.
func (t *turn) custodyQueued() {
	if t.o.Account == "" {
		t.fc = t.a.st.fleet(t.o.Agent)
	}
}
