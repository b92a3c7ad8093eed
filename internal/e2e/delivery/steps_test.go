package delivery

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cast-dev/cast/internal/deliverycheck"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

type kind int

const (
	kSend kind = iota
	kRelease
	kAwait
	kInterrupt
	kSwitch
	kFork
	kMigrate
	kNodeKill
	kCPKill
	kCLIKill
	kServiceStop
)

var kindNames = []string{"send", "release", "await", "interrupt", "switch", "fork", "migrate", "node-kill", "cp-kill", "cli-kill", "service-stop"}

func (k kind) String() string { return kindNames[k] }

// weights: how often each step is drawn.
var weights = []struct {
	k kind
	w int
}{{kSend, 30}, {kRelease, 8}, {kAwait, 8}, {kInterrupt, 10}, {kSwitch, 10}, {kFork, 5}, {kMigrate, 8}, {kNodeKill, 6}, {kCPKill, 5},
	{kCLIKill, 7}, {kServiceStop, 4}}

// maxSessions caps the sessions (two roots, then forks): each is probed at
// every quiescence.
const maxSessions = 5

// step is one drawn step: its kind and three numbers it reads its choices
// from (which session, node, agent; whether to hold), so a seed fixes the
// plan whatever the processes' timing does to the state it meets.
type step struct {
	k       kind
	a, b, c uint64
}

func plan(seed uint64, n int) []step {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	total := 0
	for _, w := range weights {
		total += w.w
	}
	out := make([]step, n)
	for i := range out {
		x := rng.IntN(total)
		for _, w := range weights {
			if x < w.w {
				out[i].k = w.k
				break
			}
			x -= w.w
		}
		out[i].a, out[i].b, out[i].c = rng.Uint64(), rng.Uint64(), rng.Uint64()
	}
	return out
}

// waitHold lets a step meant to land mid-turn wait (up to a minute) for
// the session's armed hold to take a request.
func (r *rig) waitHold(s *session) {
	h := r.rec.armed(s.tag)
	if h == nil {
		return
	}
	select {
	case <-h.reached:
		r.rec.logf("  %s's turn is held at the model", s.tag)
	case <-time.After(time.Minute):
		r.rec.logf("  %s's turn did not reach the model within a minute", s.tag)
	}
}

// apply runs step i.
func (r *rig) apply(i int, st step) {
	r.t.Helper()
	s := r.sessions[st.a%uint64(len(r.sessions))]
	r.rec.logf("step %d: %s", i, st.k)
	switch st.k {
	case kSend:
		if st.b%100 < 35 {
			if _, ok := r.rec.arm(s.tag); ok {
				r.rec.logf("  hold %s's next request", s.tag)
			}
		}
		r.send(s, st.c%100 < 25, "send")
	case kRelease:
		if tag := r.rec.release(st.a); tag != "" {
			r.rec.logf("  released %s's held request", tag)
		}
	case kAwait:
		r.await()
	case kInterrupt:
		r.waitHold(s)
		var resp *castv1.InterruptSessionResponse
		r.retry("interrupt "+s.tag, time.Minute, func(ctx context.Context) error {
			var err error
			resp, err = r.c.Sessions.InterruptSession(ctx, &castv1.InterruptSessionRequest{SessionId: s.id})
			return err
		})
		r.rec.logf("  interrupt %s: delivered %v", s.tag, resp.Delivered)
	case kSwitch:
		r.switchAgent(s, st.b)
	case kFork:
		if len(r.sessions) >= maxSessions {
			r.send(s, false, "instead of a fork: enough sessions")
			return
		}
		r.fork(s, st.b, st.c)
	case kMigrate:
		r.migrate(s, st.b%2 == 0)
	case kNodeKill:
		r.killNode(r.nodes[st.a%uint64(len(r.nodes))], int(st.b%3), st.c)
	case kCPKill:
		r.killControlPlane(st.b%2 == 0, st.c)
	case kCLIKill:
		r.killCLI(st.a, st.b%3 == 0)
	case kServiceStop:
		r.stopService(st.a, st.b%2 == 0)
	}
}

// await waits (up to 10s) for the next model request, letting turns move
// between steps; it ends early when no request can come: every session
// settled or held at a shut gate.
func (r *rig) await() {
	select {
	case <-r.rec.arrived: // an arrival before this step
	default:
	}
	deadline := time.After(10 * time.Second)
	look := time.NewTicker(500 * time.Millisecond) // polls the sessions' states
	defer look.Stop()
	for {
		select {
		case <-r.rec.arrived:
			r.rec.logf("  a request arrived")
			return
		case <-deadline:
			r.rec.logf("  no request within 10s")
			return
		case <-look.C:
			if r.still() {
				r.rec.logf("  no turn under way")
				return
			}
		}
	}
}

// still says whether no session can send a model request now: each is
// settled or its turn waits at a shut gate.
func (r *rig) still() bool {
	for _, s := range r.sessions {
		if !r.rec.heldNow(s.tag) && !settled(r.get(s), s.lastSeq) {
			return false
		}
	}
	return true
}

func (r *rig) switchAgent(s *session, k uint64) {
	r.t.Helper()
	to := r.leastUsed(s.agent, k)
	r.waitHold(s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := r.c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: s.id, Agent: to, Model: r.models[to]})
	cancel()
	from := s.agent
	got := r.get(s) // a switch has no request id: the store says what happened
	if got.Agent == to {
		r.uses[to]++
	}
	r.rec.logf("  switch %s %s -> %s: now %s (err %v)", s.tag, from, to, got.Agent, err)
}

func (r *rig) fork(parent *session, k, n uint64) {
	r.t.Helper()
	agent := r.leastUsed("", k)
	node := r.nodes[n%uint64(len(r.nodes))].Name
	s := &session{tag: fmt.Sprintf("s%d", len(r.sessions)+1), agent: agent}
	var got *castv1.Session
	r.retry("fork "+parent.tag, 2*time.Minute, func(ctx context.Context) error {
		var err error
		got, err = r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: parent.id, Agent: agent, Model: r.models[agent],
			Node: node, RequestId: "fork-" + s.tag})
		return err
	})
	s.id = got.Id // its lastSeq stays 0: the copied messages are history, not its to deliver
	r.sessions = append(r.sessions, s)
	r.uses[agent]++
	r.rec.update(func(h *deliverycheck.History) {
		h.Sessions = append(h.Sessions, deliverycheck.Session{ID: s.tag, Parent: parent.tag, ForkedAt: got.ForkedAtSeq})
	})
	r.rec.logf("  fork %s of %s at seq %d = %s on %s/%s", s.tag, parent.tag, got.ForkedAtSeq, s.id, agent, node)
}

// migrate moves s to the other node (conversation only: both nodes see
// the same folders), waiting 3s for a running turn before abandoning it;
// during sends a message while it runs.
func (r *rig) migrate(s *session, during bool) {
	r.t.Helper()
	r.waitHold(s)
	to := r.otherNode(r.get(s))
	start := r.rec.tick()
	var m *castv1.Migration
	rid := fmt.Sprintf("mig-%s-%d", s.tag, start)
	r.retry("migrate "+s.tag, 2*time.Minute, func(ctx context.Context) error {
		var err error
		m, err = r.c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: to, SessionIds: []string{s.id}, SkipWorktree: true,
			Wait: durationpb.New(3 * time.Second), RequestId: rid})
		return err
	})
	if during {
		r.send(s, false, "during the migration")
	}
	deadline := time.Now().Add(3 * time.Minute)
	for !ended(m.State) {
		if time.Now().After(deadline) {
			r.fatalf("migration %s of %s did not end within 3 minutes: %v", m.Id, s.tag, m.State)
		}
		time.Sleep(200 * time.Millisecond) // polls the migration's state
		id := m.Id
		r.retry("get migration", time.Minute, func(ctx context.Context) error {
			got, err := r.c.Migrations.GetMigration(ctx, &castv1.GetMigrationRequest{Id: id})
			if err == nil {
				m = got // a failed try leaves the last answer, not nil
			}
			return err
		})
	}
	r.rec.update(func(h *deliverycheck.History) {
		h.Faults = append(h.Faults, deliverycheck.Fault{Start: start, End: r.rec.tick(), What: "migration of " + s.tag})
	})
	reason := ""
	if len(m.Sessions) > 0 {
		reason = m.Sessions[0].Reason
	}
	r.rec.logf("  migrate %s to %s: %v %s", s.tag, to, m.State, reason)
}

func ended(s castv1.MigrationState) bool {
	return s == castv1.MigrationState_MIGRATION_STATE_SUCCEEDED || s == castv1.MigrationState_MIGRATION_STATE_FAILED ||
		s == castv1.MigrationState_MIGRATION_STATE_CANCELLED
}
