package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/faults"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// turns sends prompts to a session as a user would (acknowledged, with a
// request id) and checks at the end that each was answered exactly once.
type turns struct {
	c       *client.Client
	sess    string
	acks    []faults.Ack
	prompts []string
}

func (tr *turns) send(t *testing.T) {
	t.Helper()
	id := ids.NewClientID()
	p := "p-" + id // the fake model echoes it: the answer names its prompt
	a := faults.Ack{Session: tr.sess, ClientID: id, Body: []byte(p)}
	a.Seq = sendRetrying(t, tr.c, a)
	tr.acks, tr.prompts = append(tr.acks, a), append(tr.prompts, p)
}

// waitAnswered waits until the node has delivered every prompt and the
// session is idle again.
func (tr *turns) waitAnswered(t *testing.T, timeout time.Duration, what string) {
	t.Helper()
	last := tr.acks[len(tr.acks)-1].Seq
	testharness.WaitFor(t, timeout, what, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		s, err := tr.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: tr.sess})
		return err == nil && s.DeliveredSeq >= last && s.State == castv1.SessionState_SESSION_STATE_IDLE
	})
}

// checkAnswered fails t unless every prompt was answered exactly once.
func (tr *turns) checkAnswered(t *testing.T, ck faults.Checker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs, err := ck.Messages(ctx, tr.sess)
	if err != nil {
		t.Fatal(err)
	}
	for p, n := range faults.Answered(msgs, tr.prompts) {
		if n != 1 {
			t.Errorf("prompt %s answered %d times, want once", p, n)
		}
	}
}

// A live node is cut off from a live control plane by a partition that
// keeps every TCP connection open (nothing is reset, so the node's stream
// is half-open), first both ways, then only from the control plane to the
// node. The node notices, reconnects once the network heals, and runs the
// messages sent meanwhile, each exactly once.
func TestPartitionNodeReconnectsAndDelivers(t *testing.T) {
	fake := fakemodel.Start(t)
	// The node notices the half-open stream after a lease's silence, and
	// the control plane marks it down when its lease lapses.
	srv := testharness.StartControlPlane(t, testharness.ShortLease)
	proxy := testharness.StartProxy(t, srv.Addr())
	c := testharness.Dial(t, srv.Addr())
	dir, _ := startNode(t, proxy.Addr, "n1", "", withClaude(t, fake))
	waitConnected(t, c, "n1", 30*time.Second)
	tr := &turns{c: c, sess: newSessions(t, c, "n1", "claude", t.TempDir(), 1)[0]}
	tr.send(t)
	tr.waitAnswered(t, 2*time.Minute, "the first answer")

	cuts := []testharness.Direction{testharness.Both, testharness.FromTarget}
	if long {
		cuts = append(cuts, testharness.ToTarget, testharness.Both, testharness.FromTarget)
	}
	for i, dir := range cuts {
		dialed := proxy.Accepted()
		proxy.Blackhole(dir)
		// The node notices: it gives up the half-open stream and dials
		// again (the new connection is held until the network heals).
		testharness.WaitFor(t, 30*time.Second, "the node dialing again", func() bool { return proxy.Accepted() > dialed })
		nodeDown(t, c, "n1")
		for range scale(2, 5) {
			tr.send(t) // acknowledged by the control plane, not deliverable
		}
		proxy.Heal()
		waitConnected(t, c, "n1", time.Minute)
		tr.waitAnswered(t, 2*time.Minute, fmt.Sprintf("answers after partition %d healed", i))
	}
	ck := faults.Checker{Sessions: c.Sessions, Claims: claims(map[string]string{"n1": dir})}
	tr.checkAnswered(t, ck)
	check(t, ck, "partition node/control plane", tr.acks)
}
