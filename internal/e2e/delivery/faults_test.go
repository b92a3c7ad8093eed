package delivery

import (
	"time"

	"github.com/cast-dev/cast/internal/deliverycheck"
	"github.com/cast-dev/cast/internal/testharness"
)

// killNode is kill -9 of n; down messages are sent while it is down
// (sessions drawn from k), then it starts again on its data dir.
func (r *rig) killNode(n *testharness.NodeProc, down int, k uint64) {
	r.t.Helper()
	start := r.rec.tick()
	n.Kill()
	r.rec.logf("  kill -9 %s", n.Name)
	for i := range down {
		r.send(r.sessions[(k+uint64(i))%uint64(len(r.sessions))], false, "while "+n.Name+" is down")
	}
	r.keepLog(n.Name, n.Proc)
	n.Start(r.c)
	r.rec.update(func(h *deliverycheck.History) {
		h.Faults = append(h.Faults, deliverycheck.Fault{Start: start, End: r.rec.tick(), What: "kill -9 " + n.Name})
	})
	r.rec.logf("  %s is back", n.Name)
}

// killControlPlane is kill -9 of the control plane; with during, a send
// is under way (retrying) across the restart.
func (r *rig) killControlPlane(during bool, k uint64) {
	r.t.Helper()
	start := r.rec.tick()
	r.cp.Kill()
	r.rec.logf("  kill -9 the control plane")
	sent := make(chan error, 1)
	if during {
		s := r.sessions[k%uint64(len(r.sessions))]
		go func() { sent <- r.trySend(s, false, "across the control plane restart") }()
	} else {
		sent <- nil
	}
	r.keepLog("controlplane", r.cp.Proc)
	r.cp.Start()
	if err := <-sent; err != nil {
		r.fatalf("%v", err)
	}
	for _, n := range r.nodes {
		testharness.WaitFor(r.t, time.Minute, n.Name+" reconnected", func() bool { return testharness.NodeConnected(r.c, n.Name) })
	}
	r.rec.update(func(h *deliverycheck.History) {
		h.Faults = append(h.Faults, deliverycheck.Fault{Start: start, End: r.rec.tick(), What: "kill -9 control plane"})
	})
	r.rec.logf("  the control plane is back")
}
