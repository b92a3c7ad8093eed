package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/agents"
	_ "github.com/cast-dev/cast/internal/agents/codecs"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	"github.com/cast-dev/cast/internal/fleet"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/secrets"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
)

// noticeStore is the real store with notices recorded instead of appended
// (the sessions here do not exist), once per client id in a session, as
// the store's exactly-once append keeps them.
type noticeStore struct {
	*store.Store
	mu      sync.Mutex
	notices map[string][]string
	seen    map[string]bool // session + "/" + client id
}

func (s *noticeStore) Append(_ context.Context, id string, msgs []*castv1.Message, _ fence.Guard) ([]*castv1.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		if k := id + "/" + m.ClientId; !s.seen[k] {
			s.seen[k] = true
			s.notices[id] = append(s.notices[id], m.Text)
		}
	}
	return msgs, nil
}

// notes is every notice drawn in session id, joined.
func (r *rig) notes(id string) string {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	return strings.Join(r.st.notices[id], "\n")
}

type rig struct {
	mg  *fleet.Manager
	m   *metrics.Fleet
	st  *noticeStore
	ep  string
	now time.Time
	mu  sync.Mutex
}

func newRig(t *testing.T, withKey bool) *rig { return newRigPolicy(t, withKey, fleet.PolicyAuto) }

func newRigPolicy(t *testing.T, withKey bool, policy string) *rig {
	return newRigConfig(t, withKey, fleet.Config{Policy: policy})
}

// newRigConfig is a rig whose manager takes cfg (policy and flags; the
// rig sets the cooldown, sweep and clock).
func newRigConfig(t *testing.T, withKey bool, cfg fleet.Config) *rig {
	return newRigWrapped(t, withKey, cfg, nil)
}

// newRigWrapped is newRigConfig with the manager's store wrapped by wrap.
func newRigWrapped(t *testing.T, withKey bool, cfg fleet.Config, wrap func(fleet.Store) fleet.Store) *rig {
	ep := testharness.StartEtcd(t, nil)
	st := &noticeStore{Store: testharness.OpenStore(t, ep, nil), notices: map[string][]string{}, seen: map[string]bool{}}
	var box *secrets.Box
	if withKey {
		key := make([]byte, secrets.KeySize)
		key[0] = 7
		var err error
		if box, err = secrets.NewBox(key); err != nil {
			t.Fatal(err)
		}
	}
	r := &rig{st: st, ep: ep, now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	clock := func() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.now }
	cfg.Cooldown, cfg.Sweep, cfg.Now = time.Hour, time.Hour, clock
	r.m = metrics.NewFleet(nil)
	var fst fleet.Store = st
	if wrap != nil {
		fst = wrap(st)
	}
	mg, err := fleet.New(fst, box, cfg, zaptest.NewLogger(t), r.m)
	if err != nil {
		t.Fatal(err)
	}
	r.mg = mg
	return r
}

// putAB stores claude accounts a (active: the first) and b.
func (r *rig) putAB(t *testing.T) {
	t.Helper()
	for _, n := range []string{"a", "b"} {
		if _, err := r.mg.Put(context.Background(), "claude", n, cred("tok-"+n)); err != nil {
			t.Fatal(err)
		}
	}
}

func (r *rig) advance(d time.Duration) { r.mu.Lock(); r.now = r.now.Add(d); r.mu.Unlock() }

func cred(tok string) []byte { return []byte(`{"claudeAiOauth":{"accessToken":"` + tok + `"}}`) }

func active(t *testing.T, r *rig) quota.Active {
	t.Helper()
	act, err := r.st.ActiveAccount(context.Background(), "claude")
	if err != nil {
		t.Fatal(err)
	}
	return act
}

// Accounts are sealed in etcd, listed without secrets, the first one is
// active, and the active one cannot be deleted.
func TestAccountsLifecycle(t *testing.T) {
	r := newRig(t, true)
	ctx := context.Background()
	for _, n := range []string{"a", "b"} {
		if _, err := r.mg.Put(ctx, "claude", n, cred("sk-ant-oat01-SECRET-"+n)); err != nil {
			t.Fatal(err)
		}
	}
	list, err := r.mg.List(ctx, "")
	if err != nil || len(list) != 2 || !list[0].Active || list[1].Active {
		t.Fatalf("list: %v %v", list, err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{r.ep}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	raw, err := cli.Get(ctx, "/", clientv3.WithPrefix())
	if err != nil || len(raw.Kvs) == 0 {
		t.Fatalf("raw read: %v", err)
	}
	for _, kv := range raw.Kvs {
		if strings.Contains(string(kv.Value), "SECRET") {
			t.Fatalf("plaintext credential in etcd at %s", kv.Key)
		}
	}
	// The secret goes only with the one-time grant of a SetCredential.
	r.mg.NodeHello(ctx, "n1")
	grant := sentGrant(t, cli, "n1")
	if _, err := r.mg.Credential(ctx, "n1", "claude", "a", "forged"); reason(err) != errs.ReasonNoGrant {
		t.Fatalf("a forged grant: %v", err)
	}
	if _, err := r.mg.Credential(ctx, "n2", "claude", "a", grant); reason(err) != errs.ReasonNoGrant {
		t.Fatalf("another node's grant: %v", err)
	}
	got, err := r.mg.Credential(ctx, "n1", "claude", "a", grant)
	if err != nil || string(got) != string(cred("sk-ant-oat01-SECRET-a")) {
		t.Fatalf("credential a: %q %v", got, err)
	}
	if _, err := r.mg.Credential(ctx, "n1", "claude", "a", grant); reason(err) != errs.ReasonNoGrant {
		t.Fatalf("a grant used twice: %v", err)
	}
	if _, err := r.mg.Use(ctx, "claude", "b"); err != nil {
		t.Fatal(err)
	}
	r.mg.NodeHello(ctx, "n1")
	if _, err := r.mg.Credential(ctx, "n1", "claude", "a", sentGrant(t, cli, "n1")); reason(err) != errs.ReasonNoGrant {
		t.Fatalf("a grant for b opened a: %v", err)
	}
	if _, err := r.mg.Use(ctx, "claude", "a"); err != nil {
		t.Fatal(err)
	}
	if err := r.mg.Delete(ctx, "claude", "a"); reason(err) != errs.ReasonAccountActive {
		t.Fatalf("delete active: %v", err)
	}
	if _, err := r.mg.Use(ctx, "claude", "b"); err != nil {
		t.Fatal(err)
	}
	if err := r.mg.Delete(ctx, "claude", "a"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ agent, name, cred string }{
		{"claude", "../x", `{"claudeAiOauth":{"accessToken":"t"}}`},
		{"gemini", "g", `{}`},
		{"claude", "c", `{"claudeAiOauth":{}}`},
	} {
		if _, err := r.mg.Put(ctx, bad.agent, bad.name, []byte(bad.cred)); reason(err) != errs.ReasonInvalidArgument {
			t.Errorf("Put(%s, %s) = %v, want INVALID_ARGUMENT", bad.agent, bad.name, err)
		}
	}
}

// Without a secrets key nothing is stored or handed out.
func TestNoSecretsKey(t *testing.T) {
	r := newRig(t, false)
	if _, err := r.mg.Put(context.Background(), "claude", "a", cred("t")); reason(err) != errs.ReasonNoSecretsKey {
		t.Fatalf("Put without a key: %v", err)
	}
}

// Five sessions report the same limit at once: one switch, one notice,
// one count; when every account is limited the fleet waits, and the sweep
// re-activates the account whose window opens first.
func TestSwitchOnLimitAndReset(t *testing.T) {
	r := newRig(t, true)
	ctx := context.Background()
	r.putAB(t)
	start := active(t, r)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.mg.OnParked(ctx, "s"+string(rune('0'+i)), "claude", "a"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if act := active(t, r); act.Name != "b" || act.Epoch != start.Epoch+1 {
		t.Fatalf("after the limit: %+v (started at %+v)", act, start)
	}
	n := 0
	for _, ns := range r.st.notices {
		n += len(ns)
		if !strings.Contains(ns[0], "Now using account b (was a") {
			t.Errorf("notice %q", ns[0])
		}
	}
	if a, _ := r.st.GetAccount(ctx, "claude", "a"); n != 1 || a.Switches != 1 || a.LimitedUntil.IsZero() {
		t.Fatalf("%d notices, account a %+v", n, a)
	}

	// b is limited too, 10 minutes later: nowhere to go.
	r.advance(10 * time.Minute)
	if err := r.mg.OnParked(ctx, "s9", "claude", "b"); err != nil {
		t.Fatal(err)
	}
	before := active(t, r)
	if before.Name != "b" {
		t.Fatalf("switched with every account limited: %+v", before)
	}
	must(t, r.mg.Sweep(ctx))
	if act := active(t, r); act != before {
		t.Fatalf("the sweep moved before any reset: %+v", act)
	}
	// a's window (limited first) opens first.
	r.advance(55 * time.Minute)
	must(t, r.mg.Sweep(ctx))
	if act := active(t, r); act.Name != "a" || act.Epoch != before.Epoch+1 {
		t.Fatalf("after a's reset: %+v", act)
	}
	// b's window opens; a is active and fine: nothing changes. If a is
	// limited again later with its own window reset, it is re-activated.
	r.advance(10 * time.Minute)
	must(t, r.mg.Sweep(ctx))
	if act := active(t, r); act.Name != "a" || act.Epoch != before.Epoch+1 {
		t.Fatalf("sweep with room changed the active account: %+v", act)
	}
}

func reason(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Codex switches on a limit like Claude (the node rebuilds the session's
// rollout without the old account's encrypted reasoning); under resume it
// still waits for its own account's reset.
func TestCodexSwitchesOnALimit(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   string // the active account after the limit
	}{
		{fleet.PolicyAuto, "b"},
		{fleet.PolicyResume, "a"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			r := newRigPolicy(t, true, tc.policy)
			ctx := context.Background()
			for _, n := range []string{"a", "b"} {
				if _, err := r.mg.Put(ctx, "codex", n, []byte(`{"auth_mode":"apikey","OPENAI_API_KEY":"k-`+n+`"}`)); err != nil {
					t.Fatal(err)
				}
			}
			start, err := r.st.ActiveAccount(ctx, "codex")
			must(t, err)
			must(t, r.mg.OnParked(ctx, "s1", "codex", "a"))
			must(t, r.mg.Sweep(ctx))
			act, err := r.st.ActiveAccount(ctx, "codex")
			must(t, err)
			switched := tc.want != "a"
			if act.Name != tc.want || (act.Epoch > start.Epoch) != switched || strings.Contains(r.notes("s1"), "Now using account b") != switched {
				t.Fatalf("%s: active %+v (from %+v), notices %q", tc.policy, act, start, r.notes("s1"))
			}
		})
	}
}

func TestSweepFinishesAnInterruptedSwitch(t *testing.T) {
	r := newRig(t, true)
	ctx := context.Background()
	r.putAB(t)
	start := active(t, r)
	// What OnParked wrote before the crash: the limit, nothing else.
	if _, err := r.st.UpdateAccount(ctx, "claude", "a", func(a *quota.Account) {
		a.LimitedUntil, a.LastLimited = r.now.Add(time.Hour), r.now
	}); err != nil {
		t.Fatal(err)
	}
	must(t, r.mg.Sweep(ctx))
	if act := active(t, r); act.Name != "b" || act.Epoch != start.Epoch+1 {
		t.Fatalf("after the sweep: %+v", act)
	}
}

// sweepMidPark runs sweep once, right after an update marks account a
// limited: where the fleet's sweep timer can fire while OnParked is
// between recording a limit and switching away from it.
type sweepMidPark struct {
	fleet.Store
	sweep func()
	once  sync.Once
	ran   atomic.Bool
}

func (s *sweepMidPark) UpdateAccount(ctx context.Context, agent, name string, fn func(*quota.Account)) (*quota.Account, error) {
	a, err := s.Store.UpdateAccount(ctx, agent, name, fn)
	if err == nil && name == "a" && !a.LimitedUntil.IsZero() {
		s.once.Do(func() { s.sweep(); s.ran.Store(true) })
	}
	return a, err
}

// A sweep that runs while a report is switching the fleet off its limited
// account (a parked turn, or usage past the switch-ahead threshold) leaves
// that switch to the report: the session gets its account_switch notice
// and the switch counts once (the sweep used to switch silently in
// between, and the report then found nothing to do).
func TestSweepDuringASwitch(t *testing.T) {
	cases := []struct {
		name, notice string
		report       func(ctx context.Context, r *rig) error
	}{
		{"parked", "Now using account b (was a, at its usage limit", func(ctx context.Context, r *rig) error {
			return r.mg.OnParked(ctx, "s1", "claude", "a")
		}},
		{"ahead", "Now using account b (was a, at 96% of its 5-hour window", func(ctx context.Context, r *rig) error {
			return r.mg.OnUsage(ctx, "s1", "claude", "a", []*castv1.UsageWindow{window(96, 300, r.now.Add(time.Hour))})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mid := &sweepMidPark{}
			r := newRigWrapped(t, true, fleet.Config{Policy: fleet.PolicyAuto}, func(st fleet.Store) fleet.Store { mid.Store = st; return mid })
			mid.sweep = func() { must(t, r.mg.Sweep(ctx)) }
			r.putAB(t)
			start := active(t, r)
			must(t, tc.report(ctx, r))
			if !mid.ran.Load() {
				t.Fatal("the sweep never ran between the limit and the switch")
			}
			if act := active(t, r); act.Name != "b" || act.Epoch != start.Epoch+1 {
				t.Fatalf("after the limit: %+v (started at %+v)", act, start)
			}
			if n := r.notes("s1"); !strings.Contains(n, tc.notice) {
				t.Fatalf("notices in the session: %q", n)
			}
			if a, _ := r.st.GetAccount(ctx, "claude", "a"); a.Switches != 1 {
				t.Fatalf("switches counted on a: %d, want 1", a.Switches)
			}
		})
	}
}

// sentGrant is the grant of the newest SetCredential queued for node.
func sentGrant(t *testing.T, cli *clientv3.Client, node string) string {
	t.Helper()
	resp, err := cli.Get(context.Background(), store.DefaultPrefix+"nodecmds/"+node+"/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend))
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("no command for %s: %v", node, err)
	}
	cmd := &castv1.Command{}
	must(t, proto.Unmarshal(resp.Kvs[0].Value, cmd))
	if cmd.GetSetCredential().GetGrant() == "" {
		t.Fatalf("newest command for %s has no grant: %v", node, cmd)
	}
	return cmd.GetSetCredential().Grant
}

func window(pct float64, minutes int, resets time.Time) *castv1.UsageWindow {
	return &castv1.UsageWindow{Name: "primary", UsedPercent: pct, WindowMinutes: int32(minutes), ResetsAt: timestamppb.New(resets)}
}

// Usage from the provider: under the threshold it is only recorded; at
// 95% of a 5-hour window the fleet switches ahead of the limit, with the
// window's own reset as the end of the limit; and a weekly window waits
// for 97%.
func TestSwitchAheadOnUsage(t *testing.T) {
	r := newRig(t, true)
	ctx := context.Background()
	r.putAB(t)
	reset := r.now.Add(90 * time.Minute)
	must(t, r.mg.OnUsage(ctx, "s1", "claude", "a", []*castv1.UsageWindow{window(94, 300, reset), window(96, 7*24*60, reset.Add(72*time.Hour))}))
	if act := active(t, r); act.Name != "a" {
		t.Fatalf("switched below the thresholds: %+v", act)
	}
	list, err := r.mg.List(ctx, "claude")
	must(t, err)
	if len(list[0].Usage) != 2 || list[0].Usage[0].UsedPercent != 94 {
		t.Fatalf("usage not recorded: %v", list[0])
	}
	must(t, r.mg.OnUsage(ctx, "s1", "claude", "a", []*castv1.UsageWindow{window(95.5, 300, reset)}))
	if act := active(t, r); act.Name != "b" {
		t.Fatalf("no switch ahead at 95.5%% of a 5-hour window: %+v", act)
	}
	a, err := r.st.GetAccount(ctx, "claude", "a")
	must(t, err)
	if !a.LimitedUntil.Equal(reset) {
		t.Fatalf("limited until %v, want the window's reset %v", a.LimitedUntil, reset)
	}
	if ns := r.st.notices["s1"]; len(ns) != 1 || !strings.Contains(ns[0], "at 96% of its 5-hour window") {
		t.Fatalf("notices %q", ns)
	}
}

// A Codex limit ends when the provider said the window resets (not after
// the cooldown), and the sweep re-activates the account right then.
func TestCodexLimitEndsAtTheWindowReset(t *testing.T) {
	r := newRig(t, true)
	ctx := context.Background()
	if _, err := r.mg.Put(ctx, "codex", "a", []byte(`{"OPENAI_API_KEY":"k"}`)); err != nil {
		t.Fatal(err)
	}
	reset := r.now.Add(20 * time.Minute)
	must(t, r.mg.OnUsage(ctx, "s1", "codex", "a", []*castv1.UsageWindow{window(99, 300, reset)}))
	must(t, r.mg.OnParked(ctx, "s1", "codex", "a"))
	a, err := r.st.GetAccount(ctx, "codex", "a")
	must(t, err)
	if !a.LimitedUntil.Equal(reset) {
		t.Fatalf("limited until %v, want %v", a.LimitedUntil, reset)
	}
	get := func() quota.Active {
		act, err := r.st.ActiveAccount(ctx, "codex")
		must(t, err)
		return act
	}
	before := get()
	r.advance(19 * time.Minute)
	must(t, r.mg.Sweep(ctx))
	if get() != before {
		t.Fatal("re-activated before the reset")
	}
	r.advance(2 * time.Minute)
	must(t, r.mg.Sweep(ctx))
	if act := get(); act.Epoch != before.Epoch+1 {
		t.Fatalf("not re-activated at the reset: %+v", act)
	}
}

// resume never switches but re-activates at the reset; off only records.
func TestPolicies(t *testing.T) {
	for _, tc := range []struct {
		name, fleet, account, answer string
		resumes                      bool
	}{
		{"resume", fleet.PolicyResume, "", "", true},
		{"off", fleet.PolicyOff, "", "", false},
		{"account resume under auto", fleet.PolicyAuto, fleet.PolicyResume, "", true},
		{"account off under auto", fleet.PolicyAuto, fleet.PolicyOff, "", false},
		{"account ask, denied", fleet.PolicyAuto, fleet.PolicyAsk, "deny", true},
		{"ask unanswered until the reset", fleet.PolicyAsk, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigPolicy(t, true, tc.fleet)
			ctx := context.Background()
			r.putAB(t)
			if tc.account != "" {
				_, err := r.mg.SetPolicy(ctx, "claude", "a", tc.account)
				must(t, err)
			}
			start := active(t, r)
			must(t, r.mg.OnParked(ctx, "s1", "claude", "a"))
			must(t, r.mg.Sweep(ctx))
			if act := active(t, r); act != start {
				t.Fatalf("%s switched: %+v", tc.name, act)
			}
			asks := tc.account == fleet.PolicyAsk || tc.fleet == fleet.PolicyAsk
			if c, _ := r.st.Choice(ctx, "claude"); asks != (c.From == "a") || asks != strings.Contains(r.notes("s1"), "cast account approve --agent claude") {
				t.Fatalf("choice %+v, notices %q", c, r.notes("s1"))
			}
			if tc.answer == "deny" {
				to, ids, err := r.mg.Answer(ctx, "claude", false)
				if err != nil || to != "a" || len(ids) != 1 || !strings.Contains(r.notes("s1"), "switch denied") {
					t.Fatalf("deny: %q %v %v; notices %q", to, ids, err, r.notes("s1"))
				}
			}
			r.advance(61 * time.Minute)
			must(t, r.mg.Sweep(ctx))
			if act := active(t, r); (act.Epoch == start.Epoch+1) != tc.resumes || act.Name != "a" {
				t.Fatalf("%s after the reset: %+v (from %+v)", tc.name, act, start)
			}
			if c, _ := r.st.Choice(ctx, "claude"); c.From != "" {
				t.Fatalf("a choice outlived the reset: %+v", c)
			}
		})
	}
	bad := fleet.DefaultConfig()
	bad.Policy = "sometimes"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "ask, auto, resume or off") {
		t.Fatalf("policy sometimes: %v", err)
	}
	r := newRig(t, true)
	r.putAB(t)
	if _, err := r.mg.SetPolicy(context.Background(), "claude", "a", "sometimes"); err == nil {
		t.Fatal("an unknown account policy was stored")
	}
}

// Approving a pending choice: several sessions parked on one limit share
// one choice, the approval switches once to the account with most room
// and each session gets the notice; a second answer finds nothing
// pending. With no account to go to, approval is refused and the choice
// stays.
func TestAskApprove(t *testing.T) {
	r := newRigPolicy(t, true, fleet.PolicyAsk)
	ctx := context.Background()
	r.putAB(t)
	must(t, r.mg.OnParked(ctx, "s1", "claude", "a"))
	must(t, r.mg.OnParked(ctx, "s2", "claude", "a"))
	must(t, r.mg.OnParked(ctx, "s1", "claude", "a"))
	if strings.Count(r.notes("s1"), "waits for a choice") != 1 {
		t.Fatalf("s1 asked %q", r.notes("s1"))
	}
	to, ids, err := r.mg.Answer(ctx, "claude", true)
	if err != nil || to != "b" || !slices.Equal(ids, []string{"s1", "s2"}) || active(t, r).Name != "b" {
		t.Fatalf("approve: %q %v %v", to, ids, err)
	}
	for _, id := range ids {
		if !strings.Contains(r.notes(id), "Now using account b (was a, at its usage limit; switch approved") {
			t.Fatalf("%s notices %q", id, r.notes(id))
		}
	}
	var e *errs.Error
	if _, _, err := r.mg.Answer(ctx, "claude", true); !errors.As(err, &e) || e.Reason != errs.ReasonNoChoice {
		t.Fatalf("second answer: %v", err)
	}
	must(t, r.mg.OnParked(ctx, "s3", "claude", "b"))
	if _, _, err := r.mg.Answer(ctx, "claude", true); !errors.As(err, &e) || e.Reason != errs.ReasonNoHeadroom {
		t.Fatalf("approve with every account limited: %v", err)
	}
	if c, _ := r.st.Choice(ctx, "claude"); c.From != "b" || !slices.Equal(c.Sessions, []string{"s3"}) {
		t.Fatalf("the refused approval dropped the choice: %+v", c)
	}
}

// A window whose reset has passed is no reason to switch: a Codex turn
// that ended before the provider answered reports the last rate_limits of
// its rollout, from an earlier turn, whose window has reopened since.
// Before, that old figure marked the account limited for the cooldown and
// moved the fleet off an account with room.
func TestUsageOfAWindowThatResetDoesNotSwitch(t *testing.T) {
	r := newRig(t, true)
	ctx := context.Background()
	r.putAB(t)
	start := active(t, r)
	must(t, r.mg.OnUsage(ctx, "s1", "claude", "a", []*castv1.UsageWindow{window(99, 300, r.now.Add(-time.Hour))}))
	a, err := r.st.GetAccount(ctx, "claude", "a")
	must(t, err)
	if act := active(t, r); act != start || !a.LimitedUntil.IsZero() || r.notes("s1") != "" {
		t.Fatalf("a window that reset an hour ago: active %+v (was %+v), a limited until %v, notices %q", act, start, a.LimitedUntil, r.notes("s1"))
	}
}

// The limit lasts until every window that holds it reopens: with both the
// 5-hour and the weekly window used up (a parked turn, or usage at the
// switch-ahead thresholds), the account is limited until the weekly
// reset. Before, the first of the two windows decided, so the account
// counted as open after five hours and the fleet switched back onto an
// account whose week was used up.
func TestLimitLastsUntilTheLastFullWindowResets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		report func(r *rig, ws []*castv1.UsageWindow) error
	}{
		{"parked", func(r *rig, ws []*castv1.UsageWindow) error {
			if err := r.mg.OnUsage(context.Background(), "s1", "codex", "a", ws); err != nil {
				return err
			}
			return r.mg.OnParked(context.Background(), "s1", "codex", "a")
		}},
		{"ahead", func(r *rig, ws []*castv1.UsageWindow) error {
			return r.mg.OnUsage(context.Background(), "s1", "codex", "a", ws)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, true)
			ctx := context.Background()
			for _, n := range []string{"a", "b"} {
				if _, err := r.mg.Put(ctx, "codex", n, []byte(`{"OPENAI_API_KEY":"k-`+n+`"}`)); err != nil {
					t.Fatal(err)
				}
			}
			short, week := r.now.Add(time.Hour), r.now.Add(72*time.Hour)
			ws := []*castv1.UsageWindow{window(100, 300, short), window(100, 7*24*60, week)}
			ws[1].Name = "secondary"
			must(t, tc.report(r, ws))
			a, err := r.st.GetAccount(ctx, "codex", "a")
			must(t, err)
			if !a.LimitedUntil.Equal(week) {
				t.Fatalf("limited until %v, want the weekly reset %v", a.LimitedUntil, week)
			}
			// b hits its limit after a's 5-hour window reopened: a's week
			// is still used up, so the fleet stays on b.
			r.advance(2 * time.Hour)
			must(t, r.mg.OnParked(ctx, "s2", "codex", "b"))
			act, err := r.st.ActiveAccount(ctx, "codex")
			must(t, err)
			if act.Name != "b" {
				t.Fatalf("switched back onto a, whose week is used up: %+v", act)
			}
		})
	}
}

// goneAfterActivate is the store, with the caller going away (its context
// cancelled) just after an activation commits.
type goneAfterActivate struct {
	fleet.Store
	cancel atomic.Pointer[context.CancelFunc]
}

func (s *goneAfterActivate) Activate(ctx context.Context, agent, name string, prev quota.Active, owed quota.SwitchNotice) (quota.Active, bool, error) {
	act, ok, err := s.Store.Activate(ctx, agent, name, prev, owed)
	if c := s.cancel.Load(); c != nil {
		(*c)()
	}
	return act, ok, err
}

// An activation that committed reaches the connected nodes even when its
// caller has gone meanwhile (`cast account use` interrupted, a deadline):
// the broadcast ran on the caller's context, so no node heard of the
// switch and each kept the old account, limited or not, until it
// reconnected.
func TestActivationReachesNodesAfterItsCallerLeft(t *testing.T) {
	gone := &goneAfterActivate{}
	r := newRigWrapped(t, true, fleet.Config{Policy: fleet.PolicyAuto}, func(st fleet.Store) fleet.Store { gone.Store = st; return gone })
	r.putAB(t)
	bg := context.Background()
	if _, err := r.st.RegisterNode(bg, &castv1.Node{Name: "n1"}, "r1", time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	gone.cancel.Store(&cancel)
	if _, err := r.mg.Use(ctx, "claude", "b"); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{r.ep}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(bg, store.DefaultPrefix+"nodecmds/n1/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		cmd := &castv1.Command{}
		must(t, proto.Unmarshal(kv.Value, cmd))
		if cmd.GetSetCredential().GetAccount() == "b" {
			return
		}
	}
	t.Fatalf("n1 was never told to write b (%d commands queued)", len(resp.Kvs))
}

// flakyCustody is custody's record (the vault) whose next Delete fails
// (etcd unreachable for a moment, or the control plane killed there).
type flakyCustody struct {
	*store.Vault
	failDelete atomic.Bool
}

func (c *flakyCustody) Delete(ctx context.Context, agent, account string) error {
	if c.failDelete.CompareAndSwap(true, false) {
		return errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "delete custody record: etcd not answering")
	}
	return c.Vault.Delete(ctx, agent, account)
}

// claudeLogin is a Claude login with a refresh token, ordered by expires.
func claudeLogin(tok string, expires time.Time) []byte {
	return fmt.Appendf(nil, `{"claudeAiOauth":{"accessToken":%q,"refreshToken":"rt-%s","expiresAt":%d}}`, tok, tok, expires.UnixMilli())
}

// `cast account rm` takes the login out of custody with the account, and
// running it again finishes a removal cut off in between. The account was
// removed first and its login after, so a second rm stopped at "no such
// account" and the login stayed in custody for good: a custodian kept
// refreshing nothing, and a later `cast account add` of that name with an
// older login was served the removed one (custody keeps the newer).
func TestAccountRemovalDropsCustodyOnRetry(t *testing.T) {
	cust := &flakyCustody{}
	r := newRigWrapped(t, true, fleet.Config{Policy: fleet.PolicyAuto, Custody: cust}, func(st fleet.Store) fleet.Store {
		key := make([]byte, secrets.KeySize)
		box, err := secrets.NewBox(key)
		must(t, err)
		cust.Vault = st.(*noticeStore).Store.Vault(box, agents.CredentialFor)
		return st
	})
	ctx := context.Background()
	for _, n := range []string{"a", "b"} {
		if _, err := r.mg.Put(ctx, "claude", n, claudeLogin("at-"+n, r.now.Add(8*time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := cust.Get(ctx, "claude", "a"); err != nil {
		t.Fatalf("custody does not hold a: %v", err)
	}
	if _, err := r.mg.Use(ctx, "claude", "b"); err != nil {
		t.Fatal(err)
	}
	cust.failDelete.Store(true)
	if err := r.mg.Delete(ctx, "claude", "a"); err == nil {
		t.Error("the removal did not reach custody and Delete said nothing")
	}
	_ = r.mg.Delete(ctx, "claude", "a") // the person runs it again
	if _, _, err := cust.Get(ctx, "claude", "a"); !errs.HasReason(err, custody.ReasonNotInCustody) {
		t.Fatalf("the removed account's login is still in custody (%v)", err)
	}
}

// rigWithA is a rig whose active claude account is a, and a client of
// its etcd to read what the manager queued.
func rigWithA(t *testing.T) (*rig, *clientv3.Client) {
	t.Helper()
	r := newRig(t, true)
	if _, err := r.mg.Put(context.Background(), "claude", "a", cred("sk-ant-oat01-SECRET-a")); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{r.ep}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return r, cli
}

// A node whose grant lapsed before it could fetch the active account (its
// first fetch failed for a moment, and its custody round tried again after
// the minute) is sent the switch again with a fresh grant. It was only
// refused: the node dropped the switch and stayed on the old account (the
// limited one, after a switch on a limit) until it reconnected.
func TestCredentialWithALapsedGrantIsSentAgain(t *testing.T) {
	r, cli := rigWithA(t)
	ctx := context.Background()
	r.mg.NodeHello(ctx, "n1")
	lapsed := sentGrant(t, cli, "n1")
	// What the grant's lease ending does after a minute.
	if _, err := cli.Delete(ctx, store.DefaultPrefix+"credgrants/n1/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.mg.Credential(ctx, "n1", "claude", "a", lapsed); reason(err) != errs.ReasonNoGrant {
		t.Fatalf("a lapsed grant: %v", err)
	}
	fresh := sentGrant(t, cli, "n1")
	if fresh == lapsed {
		t.Fatal("no SetCredential sent again after the lapsed grant was refused")
	}
	got, err := r.mg.Credential(ctx, "n1", "claude", "a", fresh)
	if err != nil || string(got) != string(cred("sk-ant-oat01-SECRET-a")) {
		t.Fatalf("credential a with the fresh grant: %q %v", got, err)
	}
}

// A node whose fetches keep being refused (a bug, or made-up grants) was
// sent a fresh grant and SetCredential for every refused fetch, without
// end. Resends to a node are paced (from a second, doubling to a grant's
// minute) until one of its fetches works; then a refusal is answered at
// once again.
func TestRefusedFetchesResendAtABoundedPace(t *testing.T) {
	r, cli := rigWithA(t)
	ctx := context.Background()
	commands := func() int64 {
		t.Helper()
		resp, err := cli.Get(ctx, store.DefaultPrefix+"nodecmds/n1/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		must(t, err)
		return resp.Count
	}
	refusals := func(n int) int64 {
		t.Helper()
		before := commands()
		for range n {
			if _, err := r.mg.Credential(ctx, "n1", "claude", "a", "made-up"); reason(err) != errs.ReasonNoGrant {
				t.Fatalf("a made-up grant: %v", err)
			}
		}
		return commands() - before
	}
	if sent := refusals(50); sent != 1 {
		t.Fatalf("50 refused fetches at once sent %d commands, want 1", sent)
	}
	for _, pause := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		r.advance(pause - time.Millisecond)
		if sent := refusals(1); sent != 0 {
			t.Fatalf("a refused fetch inside the %s pause sent %d commands", pause, sent)
		}
		r.advance(time.Millisecond)
		if sent := refusals(5); sent != 1 {
			t.Fatalf("refused fetches after the %s pause sent %d commands, want 1", pause, sent)
		}
	}
	r.advance(time.Hour) // long past any pause
	if sent := refusals(5); sent != 1 {
		t.Fatalf("refused fetches an hour on sent %d commands, want 1", sent)
	}
	if _, err := r.mg.Credential(ctx, "n1", "claude", "a", sentGrant(t, cli, "n1")); err != nil {
		t.Fatal(err)
	}
	if sent := refusals(1); sent != 1 {
		t.Fatalf("a refused fetch after one that worked sent %d commands, want 1 at once", sent)
	}
}

// noticeLost is the real store (appending for real, so the store's
// exactly-once de-duplication holds) whose first Append fails: the switch
// committed, then its replica died before the notice was written.
type noticeLost struct {
	fleet.Store
	real   *store.Store
	failed atomic.Bool
}

func (s *noticeLost) Append(ctx context.Context, id string, msgs []*castv1.Message, g fence.Guard) ([]*castv1.Message, error) {
	if s.failed.CompareAndSwap(false, true) {
		return nil, errors.New("replica gone")
	}
	return s.real.Append(ctx, id, msgs, g)
}

// newLostRig is a rig under policy with accounts a (active) and b, whose
// store's first Append fails (lost).
func newLostRig(t *testing.T, policy string) (*rig, *noticeLost) {
	t.Helper()
	lost := &noticeLost{}
	r := newRigWrapped(t, true, fleet.Config{Policy: policy}, func(st fleet.Store) fleet.Store {
		lost.Store, lost.real = st, st.(*noticeStore).Store
		return lost
	})
	r.putAB(t)
	return r, lost
}

// A switch whose notice was never written gets it from the node's resend
// of the limit report, once however often the report comes: the resend
// found the fleet moved and drew nothing, so the session never said why
// its account changed.
func TestResentLimitReportWritesTheLostNotice(t *testing.T) {
	r, _ := newLostRig(t, fleet.PolicyAuto)
	ctx := context.Background()
	sessions := map[string]string{}
	for _, name := range []string{"hit", "other"} {
		c, err := r.st.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp"})
		must(t, err)
		sessions[name] = c.Session.Id
	}
	if err := r.mg.OnParked(ctx, sessions["hit"], "claude", "a"); err == nil {
		t.Fatal("the notice's append failed, yet the report was answered as done")
	}
	if act := active(t, r); act.Name != "b" {
		t.Fatalf("the switch did not commit: %+v", act)
	}
	for range 2 { // the node's resend, and one more
		must(t, r.mg.OnParked(ctx, sessions["hit"], "claude", "a"))
	}
	// Another session's report of the same limit finds the switch made:
	// it owes that session nothing.
	must(t, r.mg.OnParked(ctx, sessions["other"], "claude", "a"))
	for name, want := range map[string]int{"hit": 1, "other": 0} {
		msgs, _, err := r.st.ListMessages(ctx, sessions[name], 0, 0, 100, "")
		must(t, err)
		var got []string
		for _, m := range msgs {
			if m.NoticeType == transcript.NoticeAccountSwitch {
				got = append(got, m.Text)
			}
		}
		if len(got) != want || (want == 1 && !strings.Contains(got[0], "Now using account b (was a")) {
			t.Errorf("session %s has account switch notices %q, want %d", name, got, want)
		}
	}
}

// newAskLost is a rig under the ask policy with accounts a (active) and b,
// whose store's first Append fails (lost), and a stored session id.
func newAskLost(t *testing.T) (*rig, *noticeLost, string) {
	t.Helper()
	r, lost := newLostRig(t, fleet.PolicyAsk)
	c, err := r.st.CreateSession(context.Background(), fence.CreateParams{Agent: "claude", Cwd: "/tmp"})
	must(t, err)
	return r, lost, c.Session.Id
}

// A parked session whose answer notice (approved, denied, or an account
// picked with `cast account use`) failed to append still gets it, once:
// the choice was resolved and the notice only logged, so the session
// never said why its turn ran on, or on which account.
func TestAskNoticeSurvivesALostAppend(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		answer     func(r *rig) error
	}{
		{"approve", "Now using account b (was a, at its usage limit; switch approved", func(r *rig) error {
			_, _, err := r.mg.Answer(context.Background(), "claude", true)
			return err
		}},
		{"deny", "Staying on account a (switch denied)", func(r *rig) error {
			_, _, err := r.mg.Answer(context.Background(), "claude", false)
			return err
		}},
		{"use", "Now using account b (was a, chosen with `cast account use`", func(r *rig) error {
			_, err := r.mg.Use(context.Background(), "claude", "b")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, lost, id := newAskLost(t)
			lost.failed.Store(true) // the question is written
			ctx := context.Background()
			must(t, r.mg.OnParked(ctx, id, "claude", "a"))
			lost.failed.Store(false) // the answer's notice is not
			_ = tc.answer(r)         // the answer committed
			for range 2 {            // the retry path, twice: the notice is kept once
				_ = r.mg.Sweep(ctx)
			}
			msgs, _, err := r.st.ListMessages(ctx, id, 0, 0, 100, "")
			must(t, err)
			n := 0
			for _, m := range msgs {
				if strings.Contains(m.Text, tc.want) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d notices %q in the session, want one", n, tc.want)
			}
		})
	}
}

// A parked session whose question (the ask policy's notice naming the
// choice) failed to append still gets it, once: from the node's resend of
// the limit report, or from the sweep when no resend comes. Before, the
// choice listed the session already, the resend drew nothing, and the
// session waited on a choice it never heard of.
func TestAskQuestionSurvivesALostAppend(t *testing.T) {
	for _, tc := range []struct {
		name  string
		retry func(r *rig, id string) error
	}{
		{"resend", func(r *rig, id string) error { return r.mg.OnParked(context.Background(), id, "claude", "a") }},
		{"sweep", func(r *rig, _ string) error { return r.mg.Sweep(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, id := newAskLost(t) // the question's append fails
			ctx := context.Background()
			if err := r.mg.OnParked(ctx, id, "claude", "a"); err == nil {
				t.Fatal("the question's append failed, yet the report was answered as done")
			}
			for range 2 { // the retry, twice: the question is kept once
				must(t, tc.retry(r, id))
			}
			msgs, _, err := r.st.ListMessages(ctx, id, 0, 0, 100, "")
			must(t, err)
			n := 0
			for _, m := range msgs {
				if m.NoticeType == transcript.NoticeAccountChoice && strings.Contains(m.Text, "waits for a choice") {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d questions in the session, want one", n)
			}
		})
	}
}

// A notice owed to a session that was removed meanwhile is dropped, not
// written again by every sweep for ever (each time a warning, and the
// choice's key never emptied).
func TestOwedNoticeOfARemovedSessionIsDropped(t *testing.T) {
	r, lost, id := newAskLost(t)
	lost.failed.Store(true) // every append is real
	ctx := context.Background()
	must(t, r.mg.OnParked(ctx, id, "claude", "a"))
	must(t, r.st.PurgeSession(ctx, id, func(*castv1.Session) error { return nil }))
	_, _, err := r.mg.Answer(ctx, "claude", false) // owes the removed session its notice
	must(t, err)
	must(t, r.mg.Sweep(ctx))
	c, err := r.st.Choice(ctx, "claude")
	must(t, err)
	if len(c.Owed) != 0 {
		t.Fatalf("after a sweep the choice still owes %+v", c.Owed)
	}
}

// A switch whose notice was never written still gets it, once, when
// another activation (here `cast account use`) lands before the node's
// resend of the limit report: the notice was kept only in the active
// record, which the next activation replaced, so the resend found none
// for the session and the session never said why its account changed.
func TestLostSwitchNoticeSurvivesTheNextActivation(t *testing.T) {
	r, _ := newLostRig(t, fleet.PolicyAuto)
	ctx := context.Background()
	if _, err := r.mg.Put(ctx, "claude", "c", cred("tok-c")); err != nil {
		t.Fatal(err)
	}
	c, err := r.st.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp"})
	must(t, err)
	id := c.Session.Id
	if err := r.mg.OnParked(ctx, id, "claude", "a"); err == nil {
		t.Fatal("the notice's append failed, yet the report was answered as done")
	}
	next := active(t, r).Name
	other := map[string]string{"b": "c", "c": "b"}[next]
	if _, err := r.mg.Use(ctx, "claude", other); err != nil {
		t.Fatal(err)
	}
	must(t, r.mg.OnParked(ctx, id, "claude", "a")) // the node's resend
	must(t, r.mg.Sweep(ctx))
	msgs, _, err := r.st.ListMessages(ctx, id, 0, 0, 100, "")
	must(t, err)
	var got []string
	for _, m := range msgs {
		if m.NoticeType == transcript.NoticeAccountSwitch {
			got = append(got, m.Text)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "Now using account "+next+" (was a") {
		t.Fatalf("the session has account switch notices %q, want one naming the switch to %s", got, next)
	}
}
