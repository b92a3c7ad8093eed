package fleet_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fence"
	"github.com/cast-dev/cast/internal/fleet"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/turnstate"
)

// The reservation ledger with overlapping turns: each turn starts on the
// account active at its start and holds a reservation (10% here) until it
// ends. Turns spread: the third on a (70% reported) crowds it and the
// fleet moves to c (the least used), the fifth on c crowds c and b (60%,
// now below a's 70% plus three turns) takes the rest. Without the ledger
// all ten would run a into its limit together. Loaded accounts are never marked limited, the notices say
// why, and once the turns end the ledger is empty.
func TestLedgerSpreadsOverlappingTurns(t *testing.T) {
	r := newRigConfig(t, true, fleet.Config{Policy: fleet.PolicyAuto, TurnReserve: 10})
	ctx := context.Background()
	for _, n := range []string{"a", "b", "c"} {
		_, err := r.mg.Put(ctx, "claude", n, cred("tok-"+n))
		must(t, err)
	}
	reset := r.now.Add(3 * time.Hour)
	for name, pct := range map[string]float64{"a": 70, "b": 60, "c": 50} {
		must(t, r.mg.OnUsage(ctx, "s-usage", "claude", name, []*castv1.UsageWindow{window(pct, 300, reset)}))
	}
	ran := map[string][]string{}
	for i := range 10 {
		id := fmt.Sprintf("s%d", i)
		on := active(t, r).Name
		ran[on] = append(ran[on], id)
		must(t, r.mg.OnStart(ctx, id, "claude", on))
	}
	if fmt.Sprint(len(ran["a"]), len(ran["c"]), len(ran["b"])) != "3 5 2" {
		t.Fatalf("turns per account: %v", ran)
	}
	if n := metrics.Value(r.m.Switches.WithLabelValues("claude", "crowded")); n != 2 {
		t.Fatalf("%v crowded switches, want 2", n)
	}
	if got := r.notes(ran["a"][2]); !strings.Contains(got, "Now using account c (was a, at 70% of its 5-hour window with 3 turns running") {
		t.Fatalf("notice %q", got)
	}
	list, err := r.mg.List(ctx, "claude")
	must(t, err)
	for _, a := range list {
		if a.LimitedUntil != nil {
			t.Fatalf("a crowded account was marked limited: %v", a)
		}
	}
	for _, ids := range ran {
		for _, id := range ids {
			must(t, r.mg.OnEnd(ctx, id, "claude"))
		}
	}
	if res, err := r.st.Reservations(ctx, "claude"); err != nil || len(res) != 0 {
		t.Fatalf("ledger after every turn ended: %v %v", res, err)
	}
}

// Parallel turns reported at once on the same account: the ledger counts
// every one, the fleet moves once, and reservations are released whole.
func TestLedgerParallelStarts(t *testing.T) {
	r := newRigConfig(t, true, fleet.Config{Policy: fleet.PolicyAuto, TurnReserve: 5})
	ctx := context.Background()
	r.putAB(t)
	must(t, r.mg.OnUsage(ctx, "s-usage", "claude", "a", []*castv1.UsageWindow{window(80, 300, r.now.Add(time.Hour))}))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() { errs <- r.mg.OnStart(ctx, fmt.Sprintf("p%d", i), "claude", "a") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	res, err := r.st.Reservations(ctx, "claude")
	if err != nil || res["a"] != 8 {
		t.Fatalf("reservations %v %v, want 8 on a", res, err)
	}
	if act := active(t, r); act.Name != "b" || act.Epoch != 2 {
		t.Fatalf("active %+v, want one move to b", act)
	}
	for i := range 8 {
		must(t, r.mg.OnEnd(ctx, fmt.Sprintf("p%d", i), "claude"))
	}
	if res, _ := r.st.Reservations(ctx, "claude"); len(res) != 0 {
		t.Fatalf("ledger after the turns: %v", res)
	}
}

// A node whose turn report timed out (an observer was slow) sends the same
// report again, and the fleet hears it twice: each part must come out as
// if it had heard it once. The reservation is one key per session, the
// usage a snapshot, the switch happens once (the second finds the fleet
// moved) with one notice, and the limit counts once (it was counted per
// report: a resent one doubled cast_account_limits_total).
func TestResentTurnReportActsOnce(t *testing.T) {
	r := newRig(t, true)
	ctx := context.Background()
	r.putAB(t)
	sess := &castv1.Session{Id: "s1", Agent: "claude"}
	reset := r.now.Add(3 * time.Hour)
	twice := func(st castv1.SessionState) {
		t.Helper()
		rep := turnstate.Report{SessionID: sess.Id, State: fence.TurnState{State: st}, FleetAccount: "a",
			Usage: []*castv1.UsageWindow{window(40, 300, reset)}}
		for range 2 {
			must(t, r.mg.TurnReported(ctx, sess, rep))
		}
	}
	twice(castv1.SessionState_SESSION_STATE_RUNNING)
	if res, err := r.st.Reservations(ctx, "claude"); err != nil || res["a"] != 1 {
		t.Fatalf("reservations after a resent start: %v, %v; want one on a", res, err)
	}
	twice(castv1.SessionState_SESSION_STATE_PARKED)
	if res, err := r.st.Reservations(ctx, "claude"); err != nil || len(res) != 0 {
		t.Fatalf("reservations after a resent end: %v, %v; want none", res, err)
	}
	a, err := r.st.GetAccount(ctx, "claude", "a")
	must(t, err)
	if act := active(t, r); act.Name != "b" || a.Switches != 1 || strings.Count(r.notes(sess.Id), "Now using account b") != 1 {
		t.Fatalf("after a resent limit: active %+v, %d switches, notices %q", act, a.Switches, r.notes(sess.Id))
	}
	if n := metrics.Value(r.m.Limited.WithLabelValues("claude")); n != 1 {
		t.Fatalf("a resent limit counted %v times, want once", n)
	}
}

// cutAfterSwitch is the store as a node's turn report sees it when its
// call is cut (its deadline passes, the node gives up) right after the
// fleet's switch commits: every later store call fails as the real
// store's would on a call's ended context.
type cutAfterSwitch struct {
	fleet.Store
	cut  context.CancelFunc
	once sync.Once
}

func (c *cutAfterSwitch) Activate(ctx context.Context, agent, name string, prev quota.Active, owed quota.SwitchNotice) (quota.Active, bool, error) {
	next, ok, err := c.Store.Activate(ctx, agent, name, prev, owed)
	if ok && c.cut != nil {
		c.once.Do(c.cut)
	}
	return next, ok, err
}

func (c *cutAfterSwitch) Append(ctx context.Context, id string, msgs []*castv1.Message, g fence.Guard) ([]*castv1.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.Store.Append(ctx, id, msgs, g)
}

// A turn report cut between the fleet's switch and the session's notice
// (the node's call timed out) must still leave the notice in the session:
// the node's resend finds the fleet moved and switches nothing, so the
// first report is the only one that can draw it.
func TestSwitchNoticeSurvivesACutReport(t *testing.T) {
	first, cut := context.WithCancel(context.Background())
	defer cut()
	c := &cutAfterSwitch{}
	r := newRigWrapped(t, true, fleet.Config{Policy: fleet.PolicyAuto}, func(st fleet.Store) fleet.Store { c.Store = st; return c })
	r.putAB(t)
	c.cut = cut // after the accounts' first activation
	sess := &castv1.Session{Id: "s1", Agent: "claude"}
	rep := turnstate.Report{SessionID: sess.Id, State: fence.TurnState{State: castv1.SessionState_SESSION_STATE_PARKED}, FleetAccount: "a"}
	_ = r.mg.TurnReported(first, sess, rep)                     // cut: its error is the node's timeout
	must(t, r.mg.TurnReported(context.Background(), sess, rep)) // the node's resend
	if act := active(t, r); act.Name != "b" || strings.Count(r.notes(sess.Id), "Now using account b") != 1 {
		t.Fatalf("after a cut report and its resend: active %+v, notices %q; want b and one notice", act, r.notes(sess.Id))
	}
}

// A turn that parks on an account the fleet already switched ahead of (its
// usage was past the threshold; the turn was running on it) hit a real
// limit, and it counts once in cast_account_limits_total: the switch-ahead
// marked the account limited, so a report found it limited already and
// did not count it.
func TestLimitAfterSwitchAheadCounts(t *testing.T) {
	r := newRig(t, true)
	ctx := context.Background()
	r.putAB(t)
	must(t, r.mg.OnUsage(ctx, "s1", "claude", "a", []*castv1.UsageWindow{window(96, 300, r.now.Add(time.Hour))}))
	if act := active(t, r); act.Name != "b" {
		t.Fatalf("no switch ahead: %+v", act)
	}
	if n := metrics.Value(r.m.Limited.WithLabelValues("claude")); n != 0 {
		t.Fatalf("a switch ahead counted as a limit %v times", n)
	}
	for range 2 { // the report, and its resend
		must(t, r.mg.OnParked(ctx, "s2", "claude", "a"))
	}
	if n := metrics.Value(r.m.Limited.WithLabelValues("claude")); n != 1 {
		t.Fatalf("a limit hit after a switch ahead counted %v times, want once", n)
	}
}
