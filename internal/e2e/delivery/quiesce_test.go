package delivery

import (
	"fmt"
	"time"

	"github.com/cast-dev/cast/internal/deliverycheck"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// settleWithin bounds each wait for the sessions to go quiet.
const settleWithin = 3 * time.Minute

// settled: no turn runs and every acknowledged message was handed to an
// agent, or the session stopped with a reason (a failed or parked turn
// keeps its prompt for the next message).
func settled(got *castv1.Session, lastSeq int64) bool {
	switch got.State {
	case castv1.SessionState_SESSION_STATE_RUNNING, castv1.SessionState_SESSION_STATE_WAITING_PERMISSION:
		return false
	case castv1.SessionState_SESSION_STATE_FAILED, castv1.SessionState_SESSION_STATE_PARKED:
		return true
	}
	return got.DeliveredSeq >= lastSeq
}

// settle waits until every session settled (all within settleWithin);
// one that does not is logged, not fatal: the probe then shows what it
// lost.
func (r *rig) settle(what string) {
	r.t.Helper()
	deadline := time.Now().Add(settleWithin)
	for _, s := range r.sessions {
		r.settleOne(s, what, deadline)
	}
}

// settleOne waits until s settled or the deadline passed, and returns
// what the store said last.
func (r *rig) settleOne(s *session, what string, deadline time.Time) *castv1.Session {
	r.t.Helper()
	for {
		got := r.get(s)
		if settled(got, s.lastSeq) {
			r.rec.logf("  %s: %s settled: %v, delivered seq %d of %d", what, s.tag, got.State, got.DeliveredSeq, s.lastSeq)
			return got
		}
		if time.Now().After(deadline) {
			r.rec.logf("  %s: %s did not settle: %v %q, delivered seq %d of %d", what, s.tag, got.State, got.StateReason, got.DeliveredSeq, s.lastSeq)
			return got
		}
		time.Sleep(200 * time.Millisecond) // polls the session's state
	}
}

// quiesce opens every held turn, sends each session a probe once it went
// quiet, waits for the probes' turns, and checks the history so far.
func (r *rig) quiesce(after int) {
	r.t.Helper()
	r.rec.logf("quiesce after step %d", after)
	r.rec.setHolds(false)
	defer r.rec.setHolds(true)
	type probe struct {
		s    *session
		mark string
	}
	// Each session is probed as soon as it is quiet (no step runs now, and
	// a probe checks its own session's messages only), so one session's
	// probe turn runs while another's backlog drains.
	var probes []probe
	settleBy := time.Now().Add(settleWithin)
	for _, s := range r.sessions {
		agent := r.settleOne(s, "before its probe", settleBy).Agent
		at := r.rec.tick()
		r.send(s, false, "probe")
		mark := deliverycheck.Mark(s.tag, s.sent)
		probes = append(probes, probe{s, mark})
		r.rec.update(func(h *deliverycheck.History) {
			h.Probes = append(h.Probes, deliverycheck.Probe{At: at, Session: s.tag, Mark: mark, Agent: agent})
		})
	}
	deadline := time.Now().Add(settleWithin)
	for _, p := range probes {
		r.awaitProbe(p.s, p.mark, deadline)
		r.rec.logf("  probe %s reached its model: %v", p.mark, r.rec.turnOf(p.mark))
	}
	r.settle("after the probes")
	r.undelivered()
	h := r.rec.history()
	var fresh []deliverycheck.Violation
	for _, v := range deliverycheck.Check(h) {
		// Once per rule and message: a message stored twice shows in
		// every later request.
		key := v.Rule + " " + v.Session + " " + v.Mark
		if v.Mark == "" {
			key += " " + v.Detail
		}
		if !r.reported[key] {
			r.reported[key] = true
			fresh = append(fresh, v)
		}
	}
	if len(fresh) > 0 {
		if !r.keepGoing {
			r.fatalf("the delivery rule broke (checked after step %d):\n%s", after, deliverycheck.Explain(h, fresh))
		}
		r.t.Errorf("seed %d: the delivery rule broke (checked after step %d; going on):\n%s", r.seed, after, deliverycheck.Explain(h, fresh))
		return
	}
	r.rec.logf("  checked: %d messages, %d requests, %d faults, %d probes: the rule holds",
		len(h.Messages), len(h.Requests), len(h.Faults), len(h.Probes))
}

// summary counts the steps of each kind in p.
func summary(p []step) string {
	n := map[kind]int{}
	for _, s := range p {
		n[s.k]++
	}
	out := ""
	for k := range kind(len(kindNames)) {
		out += fmt.Sprintf(" %s=%d", k, n[k])
	}
	return out
}

// probeCap bounds the wait for one probe however long its session keeps
// making progress.
const probeCap = 15 * time.Minute

// awaitProbe waits until mark reached s's model as a turn. Past deadline
// it waits on (up to probeCap) while s's delivered seq still advances: a
// backlog of turns draining on a loaded machine is slow, not lost, and a
// probe given up on while it drains would be stopped by the next steps'
// interrupts and counted unanswered.
func (r *rig) awaitProbe(s *session, mark string, deadline time.Time) {
	r.t.Helper()
	hardStop := time.Now().Add(probeCap)
	last := r.get(s).DeliveredSeq
	for !r.rec.turnOf(mark) && time.Now().Before(hardStop) {
		if time.Now().After(deadline) {
			now := r.get(s).DeliveredSeq
			if now <= last {
				return // no progress for a whole settleWithin: the probe shows what is stuck
			}
			r.rec.logf("  probe %s: %s still draining (delivered seq %d of %d); waiting on", mark, s.tag, now, s.lastSeq)
			last, deadline = now, time.Now().Add(settleWithin)
		}
		time.Sleep(200 * time.Millisecond) // polls the request log
	}
}
