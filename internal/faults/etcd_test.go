package faults_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/faults"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// newSessions creates n sessions on node.
func newSessions(t *testing.T, c *client.Client, node, agent, cwd string, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: agent, Node: node, Cwd: cwd, RequestId: ids.NewClientID()})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s.Id)
	}
	return out
}

// A three-member etcd cluster loses one member, then quorum, while writers
// send: with two members writes go on; without quorum every write fails
// cleanly (UNAVAILABLE or DEADLINE_EXCEEDED, never an acknowledgement and
// never another error); once quorum is back writes resume, and every
// message acknowledged at any point is there exactly once.
func TestEtcdClusterLosesMemberThenQuorum(t *testing.T) {
	cluster := testharness.StartEtcdCluster(t, 3)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir = cluster.Endpoints(), ""
	})
	c := testharness.Dial(t, srv.Addr())
	dir, _ := startNode(t, srv.Addr(), "n1", "", noAgents)
	waitConnected(t, c, "n1", 30*time.Second)
	l := newLoad(c.Sessions, newSessions(t, c, "n1", "claude", "", 3))
	writers := scale(3, 4)
	stopLoad := l.start(writers, time.Duration(scale(240, 1800))*time.Second)
	defer stopLoad()

	var probes []faults.Ack
	for cycle := range scale(1, 3) {
		l.phase(t, phase, phaseWait, "acknowledgements with three members")
		cluster.Members[2].Stop()
		l.phase(t, phase, phaseWait, "acknowledgements with two of three members")
		cluster.Members[1].Stop()

		// Quorum is gone: a write fails, cleanly, and so do the writers'.
		probe := faults.Ack{Session: l.sessions[0], ClientID: ids.NewClientID(), Body: []byte("probe during the outage")}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: probe.Session, Text: string(probe.Body), RequestId: probe.ClientID})
		cancel()
		if err == nil || !retryable(status.Code(err)) {
			t.Fatalf("cycle %d: a write without quorum returned %v, want UNAVAILABLE or DEADLINE_EXCEEDED", cycle, err)
		}
		// Every writer takes a message into the outage and retries it.
		f := l.failed()
		l.allow(writers)
		testharness.WaitFor(t, 30*time.Second, "writers failing without quorum", func() bool { return l.failed() >= f+writers })

		restart(t, cluster.Members[1], cluster.Members[2])
		// The probe's retry with its id is stored once, whatever the
		// first attempt did.
		probe.Seq = sendRetrying(t, c, probe)
		probes = append(probes, probe)
		l.phase(t, phase, phaseWait, "acknowledgements after quorum returned")
	}
	stopLoad()
	t.Log(l.summary())
	l.clean(t)
	check(t, faults.Checker{Sessions: c.Sessions, Claims: claims(map[string]string{"n1": dir})}, "etcd: member, then quorum", append(l.snapshot(), probes...))
}

// restart starts stopped members again, together (one alone may wait for
// the other to make a quorum).
func restart(t *testing.T, members ...*testharness.RestartableEtcd) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(members))
	for i, m := range members {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = m.Start() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// sendRetrying sends a as a user message, retrying with its id while the
// outcome is unknown (bounded), and returns its seq.
func sendRetrying(t *testing.T, c *client.Client, a faults.Ack) int64 {
	t.Helper()
	var err error
	for range 60 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var resp *castv1.SendMessageResponse
		resp, err = c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: a.Session, Text: string(a.Body), RequestId: a.ClientID})
		cancel()
		if err == nil {
			return resp.Message.Seq
		}
		if !retryable(status.Code(err)) {
			break
		}
		time.Sleep(250 * time.Millisecond) // back-off between retries of one request
	}
	t.Fatalf("send %s: %v", a.ClientID, err)
	return 0
}
