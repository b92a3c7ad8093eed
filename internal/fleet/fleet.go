// Package fleet is cast's fleet accounts: named credential snapshots per
// agent, sealed at rest, one of which every node writes into the agent's
// shared credential store (the file all its sessions read). When a turn
// parks on a usage limit, the manager marks that account limited and
// follows the agent's policy: auto (the default) activates the account with
// the most headroom and tells every node to rewrite the store, so the nodes
// run their parked turns again; ask waits for `cast account
// approve|deny|use`; resume waits for the window to reset; off only records
// the limit. Under auto, when every account is limited the sweep activates
// the first whose window opens. The package knows nothing of gRPC.
package fleet

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/secrets"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/wire"
)

// Store is what the manager needs from the store.
type Store interface {
	PutAccount(ctx context.Context, r quota.Account) (*quota.Account, error)
	GetAccount(ctx context.Context, agent, name string) (*quota.Account, error)
	ListAccounts(ctx context.Context, agent string) ([]*quota.Account, error)
	DeleteAccount(ctx context.Context, agent, name string) error
	ActiveAccount(ctx context.Context, agent string) (quota.Active, error)
	Activate(ctx context.Context, agent, name string, prev quota.Active, owed quota.SwitchNotice) (quota.Active, bool, error)
	UpdateAccount(ctx context.Context, agent, name string, fn func(*quota.Account)) (*quota.Account, error)
	PutCredentialGrant(ctx context.Context, node, hash, agent, account string) error
	TakeCredentialGrant(ctx context.Context, node, hash string) (agent, account string, ok bool, err error)
	ListNodes(ctx context.Context) ([]*castv1.Node, error)
	SendNodeCommand(ctx context.Context, node string, cmd *castv1.Command) error
	Append(ctx context.Context, sessionID string, msgs []*castv1.Message, g fence.Guard) ([]*castv1.Message, error)
	AddChoice(ctx context.Context, agent, from string, until time.Time, sessionID string, now time.Time, question quota.SwitchNotice) (quota.Choice, bool, error)
	Choice(ctx context.Context, agent string) (quota.Choice, error)
	ResolveChoice(ctx context.Context, agent string, c quota.Choice, owed []quota.SwitchNotice) (bool, error)
	SetChoiceOwed(ctx context.Context, agent string, c quota.Choice, owed []quota.SwitchNotice) (bool, error)
	Reserve(ctx context.Context, agent, account, sessionID string) error
	Release(ctx context.Context, agent, sessionID string) error
	Reservations(ctx context.Context, agent string) (map[string]int, error)
}

// Policies (design §7): fleet-wide (--account-policy) and per account.
const (
	PolicyAsk    = "ask"    // park and ask a person: `cast account approve|deny|use`
	PolicyAuto   = "auto"   // switch to the account with most room; resume at reset when none has any
	PolicyResume = "resume" // never switch: parked turns run again when the account's window resets
	PolicyOff    = "off"    // record limits only: parked sessions wait for `cast account use` or a new message
)

func validPolicy(p string) bool {
	return p == PolicyAsk || p == PolicyAuto || p == PolicyResume || p == PolicyOff
}

// Config tunes the manager.
type Config struct {
	// Policy is what a usage limit does: auto, resume or off.
	Policy string
	// Cooldown is how long an account counts as limited after a usage
	// limit whose reset the provider did not give.
	Cooldown time.Duration
	// Sweep is how often limits are checked for a reset.
	Sweep time.Duration
	// TurnReserve is the share of each usage window (percent) the ledger
	// reserves for one running fleet turn.
	TurnReserve float64
	// MetricsAccountNames labels the usage gauges with account names
	// (the operator allows it); without it they say "active" and "best".
	MetricsAccountNames bool
	// Now is the clock (nil: time.Now); tests move it.
	Now func() time.Time
	// Custody is token custody's record (nil: --token-custody is off).
	Custody Custody
}

// Custody is token custody's record of logins (the control plane's vault).
type Custody interface {
	// Add records a login, refused with custody.ReasonNotNewer when it
	// holds a newer one.
	Add(ctx context.Context, agent, account string, raw []byte) (custody.Token, error)
	// Delete drops everything custody holds for an account.
	Delete(ctx context.Context, agent, account string) error
}

// DefaultConfig: a 5-hour window, as Claude's and Codex's short windows.
func DefaultConfig() Config {
	return Config{Policy: PolicyAuto, Cooldown: 5 * time.Hour, Sweep: 15 * time.Second, TurnReserve: 2}
}

// Validate checks c.
func (c Config) Validate() error {
	switch {
	case c.Cooldown <= 0 || c.Sweep <= 0:
		return errors.New("fleet: cooldown and sweep must be positive")
	case c.TurnReserve < 0 || c.TurnReserve > 50:
		return fmt.Errorf("--account-turn-reserve %v: a percentage from 0 to 50", c.TurnReserve)
	case !validPolicy(c.Policy):
		return fmt.Errorf("--account-policy %q: use ask, auto, resume or off", c.Policy)
	}
	return nil
}

// Manager runs fleet accounts. A nil box (no secrets key) refuses to store
// or hand out credentials with SECRETS_KEY_MISSING.
type Manager struct {
	st  Store
	box *secrets.Box
	cfg Config
	lg  *zap.Logger
	m   *metrics.Fleet
	now func() time.Time

	// parking counts, by agent and account, the OnParked calls recording
	// that account's limit and switching away from it; the sweep leaves
	// such an account to them (see OnParked).
	parkingMu sync.Mutex
	parking   map[string]int

	// resends paces sendAgain by node and agent (resendKey).
	resendMu sync.Mutex
	resends  map[string]*resend
}

// resend is when a node may next be sent a refused fetch's switch again,
// and the pauses that put it there.
type resend struct {
	next   time.Time
	pauses *retry.Pauses
}

// New builds a manager.
func New(st Store, box *secrets.Box, cfg Config, lg *zap.Logger, m *metrics.Fleet) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Manager{st: st, box: box, cfg: cfg, lg: lg, m: m, now: now, parking: map[string]int{}, resends: map[string]*resend{}}, nil
}

func aad(agent, name string) []byte { return []byte(agent + "/" + name) }

// grantHash is what the store keeps of a grant, so a read of etcd's
// grant keys does not yield usable grants.
func grantHash(grant string) string {
	h := sha256.Sum256([]byte(grant))
	return hex.EncodeToString(h[:])
}

func (mg *Manager) needBox() error {
	if mg.box == nil {
		return errs.New(errs.KindFailedPrecondition, errs.ReasonNoSecretsKey,
			"the control plane has no secrets key; start it with --secrets-key-file")
	}
	return nil
}

func validate(agent, name string) error {
	if !ids.ValidName(name) {
		return errs.Invalid("account name %q: use letters, digits, '.', '_' or '-'", name)
	}
	if _, ok := fleetLogin(agent); !ok {
		return notFleet(agent)
	}
	return nil
}

// Put stores an account's credential, sealed; the agent's first account
// becomes active at once.
func (mg *Manager) Put(ctx context.Context, agent, name string, cred []byte) (*castv1.Account, error) {
	if err := validate(agent, name); err != nil {
		return nil, err
	}
	if err := CheckCredential(agent, cred); err != nil {
		return nil, errs.Invalid("%v", err)
	}
	if err := mg.needBox(); err != nil {
		return nil, err
	}
	sealed, err := mg.box.Seal(cred, aad(agent, name))
	if err != nil {
		return nil, errs.Internal(err, "seal credential")
	}
	if err := mg.hold(ctx, agent, name, cred); err != nil {
		return nil, err
	}
	r, err := mg.st.PutAccount(ctx, quota.Account{Name: name, Agent: agent, Sealed: sealed})
	if err != nil {
		return nil, err
	}
	act, err := mg.st.ActiveAccount(ctx, agent)
	if err != nil {
		return nil, err
	}
	switch {
	case act.Name == "":
		if _, err := mg.activate(ctx, agent, name, act, "manual", quota.SwitchNotice{}); err != nil {
			return nil, err
		}
		act.Name = name
	case act.Name == name:
		// A new credential for the active account: rewrite the stores.
		if _, err := mg.activate(ctx, agent, name, act, "manual", quota.SwitchNotice{}); err != nil {
			return nil, err
		}
	}
	return toProto(r, act.Name == name), nil
}

// hold puts a login with a refresh token in custody before its account is
// stored: from then on anything may activate it (this Put, `cast account
// use`, a switch on a limit), and a node told to write it asks custody for
// the access token. Had custody not held it yet, the node would copy the
// stored login, refresh token included, and its CLI would refresh on its
// own, revoking the family for the fleet. A login older than the one in
// custody changes nothing there; any other login is not custody's.
func (mg *Manager) hold(ctx context.Context, agent, name string, cred []byte) error {
	if mg.cfg.Custody == nil {
		return nil
	}
	// Not a login custody covers, or one without a refresh token: none of
	// custody's business.
	if tok, err := agents.ParseCredential(agent, cred); err != nil || !tok.HasRefresh {
		return nil
	}
	if _, err := mg.cfg.Custody.Add(ctx, agent, name, cred); err != nil && !errs.HasReason(err, custody.ReasonNotNewer) {
		return err
	}
	return nil
}

// List lists accounts, never their secrets.
func (mg *Manager) List(ctx context.Context, agent string) ([]*castv1.Account, error) {
	rs, err := mg.st.ListAccounts(ctx, agent)
	if err != nil {
		return nil, err
	}
	active := map[string]string{}
	out := make([]*castv1.Account, 0, len(rs))
	for _, r := range rs {
		if _, ok := active[r.Agent]; !ok {
			act, err := mg.st.ActiveAccount(ctx, r.Agent)
			if err != nil {
				return nil, err
			}
			active[r.Agent] = act.Name
		}
		a := toProto(r, active[r.Agent] == r.Name)
		a.Policy = mg.policy(r)
		out = append(out, a)
	}
	return out, nil
}

// Delete removes an account that is not active, then its login from
// custody: never before, as an active account's login must stay there.
// Run again after a removal cut off between the two (the account already
// gone), it still drops the login, or custody would keep it for good.
func (mg *Manager) Delete(ctx context.Context, agent, name string) error {
	if err := validate(agent, name); err != nil {
		return err
	}
	err := mg.st.DeleteAccount(ctx, agent, name)
	if err != nil && !errs.HasReason(err, errs.ReasonNotFound) {
		return err
	}
	if mg.cfg.Custody != nil {
		if cerr := mg.cfg.Custody.Delete(ctx, agent, name); cerr != nil {
			return cerr
		}
	}
	return err
}

// Use activates an account by hand (clearing its limit: the person says
// it has room).
func (mg *Manager) Use(ctx context.Context, agent, name string) (*castv1.Account, error) {
	if err := validate(agent, name); err != nil {
		return nil, err
	}
	r, err := mg.st.UpdateAccount(ctx, agent, name, func(r *quota.Account) { r.LimitedUntil = time.Time{} })
	if err != nil {
		return nil, err
	}
	for range 10 {
		act, err := mg.st.ActiveAccount(ctx, agent)
		if err != nil {
			return nil, err
		}
		ok, err := mg.activate(ctx, agent, name, act, "manual", quota.SwitchNotice{})
		if err != nil {
			return nil, err
		}
		if ok {
			mg.dropChoice(ctx, agent, name, "chosen with `cast account use`")
			a := toProto(r, true)
			a.Policy = mg.policy(r)
			return a, nil
		}
	}
	return nil, errs.New(errs.KindAborted, errs.ReasonConflict, "the active %s account kept changing; retry", agent)
}

// Credential opens the active account's credential for the node a
// SetCredential reached: the command's one-time grant must come back with
// the request (the node↔control plane link has no mTLS yet, so a node name
// alone proves nothing). Only the active account's secret ever leaves: a
// node asking for another (an older command) is refused and gets the newer
// one next.
func (mg *Manager) Credential(ctx context.Context, node, agent, name, grant string) ([]byte, error) {
	if err := validate(agent, name); err != nil {
		return nil, err
	}
	if err := mg.needBox(); err != nil {
		return nil, err
	}
	ga, gn, ok, err := mg.st.TakeCredentialGrant(ctx, node, grantHash(grant))
	if err != nil {
		return nil, err
	}
	if !ok || ga != agent || gn != name {
		mg.sendAgain(ctx, node, agent, name)
		return nil, errs.New(errs.KindFailedPrecondition, errs.ReasonNoGrant,
			"no valid grant for node %q to fetch the %s account %q (grants come with SetCredential, work once and lapse after a minute)", node, agent, name)
	}
	act, err := mg.st.ActiveAccount(ctx, agent)
	if err != nil {
		return nil, err
	}
	if act.Name != name {
		return nil, errs.New(errs.KindFailedPrecondition, errs.ReasonAccountNotActive,
			"%s account %q is not the active one (%q is)", agent, name, act.Name).With("account", name)
	}
	r, err := mg.st.GetAccount(ctx, agent, name)
	if err != nil {
		return nil, err
	}
	cred, err := mg.box.Open(r.Sealed, aad(agent, name))
	if err != nil {
		return nil, errs.New(errs.KindFailedPrecondition, errs.ReasonNoSecretsKey,
			"the %s account %q cannot be opened with this control plane's secrets key; add it again", agent, name)
	}
	mg.resendMu.Lock()
	delete(mg.resends, resendKey(node, agent)) // it fetched: a later refusal is sent again at once
	mg.resendMu.Unlock()
	return cred, nil
}

func toProto(r *quota.Account, active bool) *castv1.Account {
	a := &castv1.Account{Name: r.Name, Agent: r.Agent, Active: active, Switches: r.Switches,
		UpdatedAt: timestamppb.New(r.UpdatedAt), UpdateTime: timestamppb.New(r.UpdatedAt)}
	a.Usage = wire.WindowsToProto(r.Usage)
	if !r.LimitedUntil.IsZero() {
		// Both: limited_until for readers older than limit_end_time (AIP-142).
		a.LimitedUntil, a.LimitEndTime = timestamppb.New(r.LimitedUntil), timestamppb.New(r.LimitedUntil)
	}
	if !r.UsageAt.IsZero() {
		a.UsageAt, a.UsageTime = timestamppb.New(r.UsageAt), timestamppb.New(r.UsageAt)
	}
	return a
}

// SwitchReasons are the reason label values of cast_account_switches_total:
// a usage limit, a person's choice, a window's reset, a crowded window
// (the ledger), and an approved ask.
var SwitchReasons = []string{"limit", "manual", "reset", "crowded", "approved"}

// activate moves the agent's active account to name (from prev), recording
// owed (the notice the switch owes a session, if any) with it, and tells
// every connected node; ok=false means a concurrent activation won.
func (mg *Manager) activate(ctx context.Context, agent, name string, prev quota.Active, reason string, owed quota.SwitchNotice) (bool, error) {
	// A limit that has passed is history: clear it, or the sweep would
	// take the account for one whose window just reset and activate it
	// once more.
	now := mg.now()
	if _, err := mg.st.UpdateAccount(ctx, agent, name, func(r *quota.Account) {
		if !r.LimitedUntil.IsZero() && !r.LimitedUntil.After(now) {
			r.LimitedUntil = time.Time{}
		}
	}); err != nil {
		return false, err
	}
	next, ok, err := mg.st.Activate(ctx, agent, name, prev, owed)
	if err != nil || !ok {
		return false, err
	}
	mg.m.Switches.WithLabelValues(agent, reason).Inc()
	mg.lg.Info("fleet account activated", zap.String("agent", agent), zap.String("account", name),
		zap.Int64("epoch", next.Epoch), zap.String("reason", reason))
	// Committed: the nodes must hear of it even if the caller has gone
	// (an interrupted `cast account use`, a deadline), or each keeps the
	// old account until it reconnects.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), broadcastTimeout)
	defer cancel()
	mg.broadcast(bctx, agent, next)
	return true, nil
}

// broadcastTimeout bounds telling the nodes of one activation (and the
// session whose report made it).
const broadcastTimeout = 30 * time.Second

// broadcast sends SetCredential to every connected node. A node that is
// down gets it when it connects again (NodeHello).
func (mg *Manager) broadcast(ctx context.Context, agent string, act quota.Active) {
	nodes, err := mg.st.ListNodes(ctx)
	if err != nil {
		mg.lg.Warn("list nodes for a credential change failed", zap.Error(err))
		return
	}
	for _, n := range nodes {
		if n.Connected {
			mg.send(ctx, n.Name, agent, act)
		}
	}
}

func (mg *Manager) send(ctx context.Context, node, agent string, act quota.Active) {
	grant := rand.Text()
	if err := mg.st.PutCredentialGrant(ctx, node, grantHash(grant), agent, act.Name); err != nil {
		mg.lg.Warn("record credential grant failed", zap.String("node", node), zap.Error(err))
		return
	}
	cmd := &castv1.Command{Id: ids.NewClientID(), Kind: &castv1.Command_SetCredential{
		SetCredential: &castv1.SetCredential{Agent: agent, Account: act.Name, Epoch: act.Epoch, Grant: grant}}}
	if err := mg.st.SendNodeCommand(ctx, node, cmd); err != nil {
		mg.lg.Warn("send credential change failed", zap.String("node", node), zap.String("agent", agent), zap.Error(err))
	}
}

// sendAgain sends node a fresh SetCredential when it asked, without a
// valid grant, for agent's active account: its grant lapsed (a fetch that
// failed for a moment, tried again after the minute) or was spent by a
// fetch whose answer it never got. Refused only, it would stay on the old
// account until it reconnected. A node whose fetches keep being refused
// (a bug, or a node sending made-up grants) would make a grant and a
// command per fetch without end: resends to a node for an agent are paced
// by retry.CredentialResend until one of its fetches works. A refusal
// inside the pause sends nothing; the node's next try after it does.
func (mg *Manager) sendAgain(ctx context.Context, node, agent, name string) {
	act, err := mg.st.ActiveAccount(ctx, agent)
	if err != nil || act.Name != name {
		return // an older account's ask: the newer one's command went out
	}
	if !mg.mayResend(node, agent) {
		mg.lg.Debug("credential grant refused again; resend paced", zap.String("node", node), zap.String("agent", agent))
		return
	}
	mg.lg.Info("credential grant lapsed; sending the switch again", zap.String("node", node), zap.String("agent", agent), zap.String("account", name))
	mg.send(ctx, node, agent, act)
}

// mayResend reports whether node may be sent agent's switch again now,
// and if so starts the next pause.
func (mg *Manager) mayResend(node, agent string) bool {
	now := mg.now()
	mg.resendMu.Lock()
	defer mg.resendMu.Unlock()
	key := resendKey(node, agent)
	r := mg.resends[key]
	if r == nil {
		r = &resend{pauses: retry.CredentialResend.Pauses()}
		mg.resends[key] = r
	}
	if now.Before(r.next) {
		return false
	}
	r.next = now.Add(r.pauses.Next())
	return true
}

func resendKey(node, agent string) string { return node + "/" + agent }

// NodeHello tells a node that just connected which account each agent's
// store must hold.
func (mg *Manager) NodeHello(ctx context.Context, node string) {
	for _, agent := range Agents() {
		act, err := mg.st.ActiveAccount(ctx, agent)
		if err != nil {
			mg.lg.Warn("read active account failed", zap.String("agent", agent), zap.Error(err))
			continue
		}
		if act.Name != "" {
			mg.send(ctx, node, agent, act)
		}
	}
}

// notice is the account_switch divider drawn in a session that hit the limit.
func notice(agent, from, to, why string, until time.Time) *castv1.Message {
	resets := ""
	if !until.IsZero() {
		resets = "; it resets at " + until.UTC().Format(time.RFC3339)
	}
	return switchNotice(agent, quota.SwitchNotice{ClientID: ids.NewClientID(),
		Text: fmt.Sprintf("Now using account %s (was %s, %s%s). This session continues here.", to, from, why, resets)})
}

// switchNotice is the account_switch notice n as a message.
func switchNotice(agent string, n quota.SwitchNotice) *castv1.Message {
	typ := n.Type
	if typ == "" {
		typ = transcript.NoticeAccountSwitch
	}
	return &castv1.Message{ClientId: n.ClientID, Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE, Agent: agent,
		NoticeType: typ, Text: n.Text}
}
