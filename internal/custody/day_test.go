package custody_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cast-dev/cast/internal/agents/codecs"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/custody/fakeoauth"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/secrets"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// The scenario: three nodes share fleet accounts A and B for a
// simulated day of refreshes (access tokens live an hour), the fleet
// switches A -> B -> A twice, and custodians are killed mid-refresh, once
// before the request reaches the provider and once after the CLI wrote the
// rotated file but before it was stored. The provider rotates refresh
// tokens and revokes the family on reuse. With custody no family is
// revoked and every turn of every node presents a live access token; with
// the copying cast did before (strategy copying: the stored file written to
// every node on each switch, each node's CLI refreshing on its own) the
// same day fails the same check.
func TestCustodyDay(t *testing.T) {
	for _, agent := range []string{"claude", "codex"} {
		t.Run(agent, func(t *testing.T) {
			d := newDay(t, agent, custodial)
			if err := d.run(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d refreshes by custodians, %d kills, %d refreshes held back while a dead custodian's was in doubt", d.refreshes, d.kills, d.inDoubt)
			if d.refreshes < 40 || d.kills != 2 || d.inDoubt == 0 {
				t.Fatal("the day did not exercise custody")
			}
			d.checkLogs()
		})
	}
}

func TestCopyingDayRevokesTheFamily(t *testing.T) {
	d := newDay(t, "claude", copying)
	err := d.run()
	if err == nil {
		t.Fatal("the day passed with copied credentials; the check cannot catch the bug")
	}
	if len(d.fake.Revoked()) == 0 {
		t.Fatalf("copying failed without a revoked family: %v", err)
	}
	t.Logf("copying fails as expected: %v", err)
}

type strategy int

const (
	custodial strategy = iota
	// copying is cast before issue 15: on a switch every node writes the
	// file stored at `cast account add` (refresh token included) into its
	// CLI's store; from then on each node's CLI refreshes on its own and
	// nothing is written back to the record.
	copying
)

const (
	lifetime = time.Hour
	margin   = 30 * time.Minute
	step     = 10 * time.Minute
	dayLen   = 24 * time.Hour
)

var accounts = []string{"A", "B"}

type simNode struct {
	name  string
	node  *custody.Node
	lease clientv3.LeaseID
	stop  context.CancelFunc
	dead  bool
	died  time.Duration // when it was killed
	dir   string
	// copying: the account whose stored file the CLI store holds.
	copied string
}

type day struct {
	t     *testing.T
	ctx   context.Context
	agent string
	strat strategy
	f     custody.Format
	fake  *fakeoauth.Server
	cli   *clientv3.Client
	v     *store.Vault
	logs  *observer.ObservedLogs
	lg    *zap.Logger

	mu    sync.Mutex
	now   time.Time
	start time.Time

	nodes     []*simNode
	snapshots map[string][]byte // copying: the files `cast account add` stored
	secrets   []string          // every token minted, to look for in the logs

	refreshes, kills, inDoubt int
	killAt                    map[time.Duration]killPoint
	killArmed                 *killPoint
}

type killPoint struct {
	account string
	after   bool // after the CLI wrote the rotated file (else before the request)
}

// errKilled unwinds a node's goroutine the way kill -9 ends the process:
// nothing after the kill point runs.
type errKilled struct{}

func newDay(t *testing.T, agent string, s strategy) *day {
	t.Helper()
	ep := testharness.StartEtcd(t, nil)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	key := make([]byte, secrets.KeySize)
	_, _ = rand.Read(key)
	box, err := secrets.NewBox(key)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(context.Background(), cli, store.DefaultConfig(), metrics.NewStore(nil), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	f, err := codecs.Credential(agent)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	d := &day{
		t: t, ctx: context.Background(), agent: agent, strat: s, f: f, cli: cli,
		v:    st.Vault(box, codecs.Credential),
		logs: logs, lg: zap.New(core),
		now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), start: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		snapshots: map[string][]byte{},
		killAt: map[time.Duration]killPoint{
			6 * time.Hour:  {account: "B", after: false},
			10 * time.Hour: {account: "A", after: true},
		},
	}
	d.fake = fakeoauth.Start(t, lifetime)
	d.fake.SetClock(d.clock)
	for _, acc := range accounts {
		raw := d.login()
		if _, err := d.v.Add(d.ctx, agent, acc, raw); err != nil {
			t.Fatal(err)
		}
		d.snapshots[acc] = raw
	}
	for i := range 3 {
		d.nodes = append(d.nodes, d.startNode(fmt.Sprintf("n%d", i+1), t.TempDir()))
	}
	return d
}

func (d *day) clock() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.now
}

// login is a browser login: a new token family in the agent's file.
func (d *day) login() []byte {
	g := d.fake.Login()
	d.secrets = append(d.secrets, g.Access, g.Refresh)
	tmpl := map[string]string{
		"claude": `{"claudeAiOauth":{"accessToken":"x","scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`,
		"codex":  `{"OPENAI_API_KEY":null,"tokens":{"id_token":"","access_token":"x","refresh_token":"","account_id":"acct"},"last_refresh":null}`,
	}[d.agent]
	raw, err := d.f.Apply([]byte(tmpl), custody.Grant{Access: g.Access, Refresh: g.Refresh, IDToken: g.IDToken, Issued: g.IssuedAt, Expires: g.ExpiresAt})
	if err != nil {
		d.t.Fatal(err)
	}
	return raw
}

func (d *day) startNode(name, dir string) *simNode {
	ctx, stop := context.WithCancel(d.ctx)
	// The node's connection lease, as the control plane grants it on Hello.
	l, err := d.cli.Grant(ctx, 2)
	if err != nil {
		d.t.Fatal(err)
	}
	ka, err := d.cli.KeepAlive(ctx, l.ID)
	if err != nil {
		d.t.Fatal(err)
	}
	go func() {
		for range ka { //nolint:revive // drain keepalive answers until the node stops
		}
	}()
	sn := &simNode{name: name, lease: l.ID, stop: stop, dir: dir}
	r := &cliRefresher{d: d, node: sn}
	n, err := custody.NewNode(custody.NodeConfig{Name: name, Dir: filepath.Join(dir, "custody"), Margin: margin, Now: d.clock},
		d.v, codecs.Credential, r, d.lg.With(zap.String("node", name)))
	if err != nil {
		d.t.Fatal(err)
	}
	sn.node = n
	return sn
}

func (d *day) active(at time.Duration) string {
	// A -> B -> A -> B -> A: two round trips.
	switch {
	case at < 4*time.Hour, at >= 8*time.Hour && at < 12*time.Hour, at >= 16*time.Hour:
		return "A"
	}
	return "B"
}

// run plays the day; it returns the first failure the check sees.
func (d *day) run() error {
	var failures []string
	start := d.start
	for at := time.Duration(0); at < dayLen; at += step {
		d.mu.Lock()
		d.now = start.Add(at)
		d.mu.Unlock()
		if kp, ok := d.killAt[at]; ok && d.strat == custodial {
			d.killArmed = &kp
		}
		d.restartDead(at)
		if d.strat == custodial {
			d.custodians()
		}
		acc := d.active(at)
		for _, n := range d.nodes {
			if n.dead {
				continue
			}
			if err := d.turn(n, acc); err != nil {
				failures = append(failures, fmt.Sprintf("%s at %s on %s: %v", n.name, at, acc, err))
			}
		}
		if rv := d.fake.Revoked(); len(rv) > 0 {
			return fmt.Errorf("token family revoked at %s: %v (turn failures: %d, first: %v)", at, rv, len(failures), first(failures))
		}
	}
	if len(failures) > 0 {
		return fmt.Errorf("%d turns without a valid token; first: %s", len(failures), failures[0])
	}
	return nil
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// custodians runs each live node's custody: the control plane elects a
// custodian per account among connected nodes, and that node refreshes.
func (d *day) custodians() {
	for _, acc := range accounts {
		for _, n := range d.nodes {
			if n.dead {
				continue
			}
			who, err := d.v.Elect(d.ctx, d.agent, acc, n.name, fence.Lease(n.lease))
			if err != nil {
				d.t.Fatal(err)
			}
			if who != n.name {
				continue
			}
			d.custody(n, acc)
			break
		}
	}
}

func (d *day) custody(n *simNode, acc string) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(errKilled); !ok {
				panic(r)
			}
			d.kill(n, d.clock().Sub(d.start))
		}
	}()
	did, err := n.node.Custody(d.ctx, d.agent, acc)
	if os.Getenv("DAYDEBUG") != "" {
		d.t.Logf("%s %s custody %s: did=%v err=%v", d.clock().Sub(d.start), n.name, acc, did, err)
	}
	switch {
	case errs.HasReason(err, errs.ReasonRefreshInDoubt):
		d.inDoubt++
	case err != nil:
		d.t.Fatalf("%s custody of %s: %v", n.name, acc, err)
	case did:
		d.refreshes++
	}
}

// kill ends n as kill -9 would: its connection lease is no longer kept
// alive, and the control plane's record of it lapses.
func (d *day) kill(n *simNode, at time.Duration) {
	n.dead, n.died = true, at
	n.stop()
	d.kills++
	testharness.WaitFor(d.t, 30*time.Second, n.name+"'s lease to lapse", func() bool {
		for _, acc := range accounts {
			if who, err := d.v.Custodian(d.ctx, d.agent, acc); err != nil || who == n.name {
				return false
			}
		}
		return true
	})
}

// restartDead brings a killed node back two steps later (another node is
// custodian by then, and must not refresh meanwhile), on its own data dir,
// as a supervisor would: it reconciles every account it held.
func (d *day) restartDead(at time.Duration) {
	for i, n := range d.nodes {
		if !n.dead || at < n.died+2*step {
			continue
		}
		nn := d.startNode(n.name, n.dir)
		for _, acc := range accounts {
			if err := nn.node.Reconcile(d.ctx, d.agent, acc); err != nil {
				d.t.Fatalf("%s reconcile at %s: %v", n.name, at, err)
			}
		}
		d.nodes[i] = nn
	}
}

// turn is one turn on n: the node prepares the CLI's store, then the CLI
// does what it does at a turn's start (refresh when it holds a refresh
// token and the access token is about to expire) and presents the access
// token to the provider.
func (d *day) turn(n *simNode, acc string) error {
	path := filepath.Join(n.dir, "cli", d.f.File())
	switch d.strat {
	case custodial:
		if _, err := n.node.Supply(d.ctx, d.agent, acc, path); err != nil {
			return err
		}
	case copying:
		if n.copied != acc {
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			if err := fsutil.WriteFileAtomic(path, d.snapshots[acc], 0o600); err != nil {
				return err
			}
			n.copied = acc
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	tok, err := d.f.Parse(raw)
	if err != nil {
		return err
	}
	if tok.HasRefresh && custody.Expiring(tok, d.clock(), cliMargin[d.agent]) {
		if err := (&cliRefresher{d: d, node: n, own: true}).Refresh(d.ctx, d.agent, path); err != nil {
			return fmt.Errorf("the CLI's own refresh: %w", err)
		}
		if raw, err = os.ReadFile(path); err != nil {
			return err
		}
	}
	return d.present(raw)
}

// cliMargin is when each CLI refreshes on its own (docs/token-custody.md).
var cliMargin = map[string]time.Duration{"claude": 5 * time.Minute, "codex": 0}

func (d *day) present(raw []byte) error {
	var v struct {
		Claude struct {
			AccessToken string `json:"accessToken"`
		} `json:"claudeAiOauth"`
		Tokens struct {
			AccessToken string `json:"access_token"`
		} `json:"tokens"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	tok := v.Claude.AccessToken + v.Tokens.AccessToken
	if ok, why := d.fake.Valid(tok); !ok {
		return fmt.Errorf("provider refused the access token: %s", why)
	}
	return nil
}

// cliRefresher refreshes the way Claude 2.1.197 and Codex 0.171 do (POST a
// refresh_token grant, write the answer into the credential file): the
// real Claude cannot be pointed at a local token endpoint, and a day of
// real CLI runs is minutes long; TestCustodianRefreshesThroughRealCodex
// runs the real Codex against the same fake.
type cliRefresher struct {
	d    *day
	node *simNode
	own  bool // a CLI refreshing on its own in a session, not the custodian's
}

func (r *cliRefresher) Refresh(ctx context.Context, agent, path string) error {
	d := r.d
	if kp := d.killArmed; !r.own && kp != nil && strings.Contains(path, string(filepath.Separator)+kp.account+string(filepath.Separator)) && !kp.after {
		d.killArmed = nil
		panic(errKilled{})
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	rt, err := d.f.RefreshToken(raw)
	if err != nil || rt == "" {
		return fmt.Errorf("no refresh token: %v", err)
	}
	body, _ := json.Marshal(map[string]string{"grant_type": "refresh_token", "refresh_token": rt, "client_id": "cli"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.fake.URL+fakeoauth.TokenPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Access    string `json:"access_token"`
		Refresh   string `json:"refresh_token"`
		ID        string `json:"id_token"`
		ExpiresIn int    `json:"expires_in"`
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("token endpoint: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return err
	}
	d.secrets = append(d.secrets, out.Access, out.Refresh)
	now := d.clock()
	next, err := d.f.Apply(raw, custody.Grant{Access: out.Access, Refresh: out.Refresh, IDToken: out.ID, Issued: now, Expires: now.Add(time.Duration(out.ExpiresIn) * time.Second)})
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(path, next, 0o600); err != nil {
		return err
	}
	if kp := d.killArmed; !r.own && kp != nil && kp.after && strings.Contains(path, string(filepath.Separator)+kp.account+string(filepath.Separator)) {
		d.killArmed = nil
		panic(errKilled{})
	}
	return nil
}

// checkLogs: no token minted all day appears in any log line.
func (d *day) checkLogs() {
	for _, e := range d.logs.All() {
		line := e.Message + fmt.Sprint(e.ContextMap())
		for _, s := range d.secrets {
			if s != "" && strings.Contains(line, s) {
				d.t.Fatalf("a token reached the log: %q", e.Message)
			}
		}
	}
	if d.logs.Len() == 0 {
		d.t.Fatal("custody logged nothing all day")
	}
}
