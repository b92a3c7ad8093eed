package node

import (
	"context"
	"net"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/delivery"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/runner"
)

// recordsReports is a NodeService on loopback that records every turn
// report, as a control plane that is up does.
type recordsReports struct {
	castv1.UnimplementedNodeServiceServer
}

func (recordsReports) ReportTurn(context.Context, *castv1.ReportTurnRequest) (*castv1.ReportTurnResponse, error) {
	return &castv1.ReportTurnResponse{}, nil
}

// serveNodes serves nodes as a control plane's NodeService on loopback
// until the test ends, and returns its address.
func serveNodes(t *testing.T, nodes castv1.NodeServiceServer) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	castv1.RegisterNodeServiceServer(srv, nodes)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}

// completedDaemon is a daemon with a fresh state whose reports land.
func completedDaemon(t *testing.T) *Daemon {
	t.Helper()
	cli, err := client.Dial(serveNodes(t, recordsReports{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	st, err := loadState(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &Daemon{cfg: Config{Name: "laptop"}, lg: zap.NewNop(), cli: cli, st: st, runCtx: context.Background()}
}

// completeTurn records a completed turn of s1 that resumed native session
// "n" and stored the rows ours.
func completeTurn(t *testing.T, a *Daemon, ours ...int64) {
	t.Helper()
	o, _ := a.st.get("s1")
	sy := &syncer{ours: map[int64]bool{}}
	for _, seq := range ours {
		sy.ours[seq], sy.lastSeq = true, max(sy.lastSeq, seq)
	}
	tr := &turn{a: a, id: "s1", o: o, lg: zap.NewNop(), sync: sy,
		rt:  runner.Turn{NativeID: "n", NativePath: "/h/n.jsonl"},
		res: runner.Result{NativeID: "n", NativePath: "/h/n.jsonl", PromptSeen: true}}
	if err := tr.completed(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A message sent while a turn ran (seq 8, between the turn's rows 6-7 and
// 9-10) is the next turn's prompt, which resumes the same native session.
// That session holds the first turn's rows after the message (9-10): its
// CLI wrote them. The next turn after that must reuse it as it is, not
// send the agent its own earlier answer as "what happened while you were
// not running it".
func TestMessageSentMidTurnDoesNotEchoTheAgentsAnswer(t *testing.T) {
	a := completedDaemon(t)
	if err := a.st.assign("s1", func(o *owned) {
		o.Token, o.Agent, o.Cwd = 1, "claude", t.TempDir()
		o.ReceivedSeq, o.DeliveredSeq = 5, 4 // the first message is seq 5
	}); err != nil {
		t.Fatal(err)
	}
	completeTurn(t, a, 6, 7, 9, 10) // seq 8: the message sent meanwhile
	if err := a.st.session("s1", func(o *owned) { o.ReceivedSeq = 8 }); err != nil {
		t.Fatal(err)
	}
	completeTurn(t, a, 11, 12) // seq 8's turn, on the same native session

	o, _ := a.st.get("s1")
	ns := o.Native["claude"]
	in := delivery.Input{Native: &delivery.Row{NativeID: ns.ID, KnownUpto: ns.KnownUpto}, Missing: ns.Missing,
		Content: []int64{5, 6, 7, 8, 9, 10, 11, 12}}
	if d := delivery.Transition(in); d.Kind != delivery.Reuse {
		t.Fatalf("the next turn makes a %v of seqs %v (known up to %d, missing %v); the native session holds every row",
			d.Kind, d.Missed, ns.KnownUpto, ns.Missing)
	}
}

// A message sent while the resumed turn runs (seq 12, between its rows 11
// and 13) is still missing from the native session after it.
func TestMessageSentDuringAResumedTurnStaysMissing(t *testing.T) {
	a := completedDaemon(t)
	if err := a.st.assign("s1", func(o *owned) {
		o.Token, o.Agent, o.Cwd = 1, "claude", t.TempDir()
		o.ReceivedSeq, o.DeliveredSeq = 5, 4
	}); err != nil {
		t.Fatal(err)
	}
	completeTurn(t, a, 6, 7, 9, 10) // seq 8: a message sent meanwhile
	if err := a.st.session("s1", func(o *owned) { o.ReceivedSeq = 8 }); err != nil {
		t.Fatal(err)
	}
	completeTurn(t, a, 11, 13) // seq 12: another one sent during seq 8's turn

	o, _ := a.st.get("s1")
	ns := o.Native["claude"]
	in := delivery.Input{Native: &delivery.Row{NativeID: ns.ID, KnownUpto: ns.KnownUpto}, Missing: ns.Missing,
		Content: []int64{5, 6, 7, 8, 9, 10, 11, 12, 13}}
	if d := delivery.Transition(in); d.Kind != delivery.Delta || d.Missed != (delivery.Range{From: 12, To: 12}) || d.MissedCount != 1 {
		t.Fatalf("the next turn makes a %v of seqs %v (known up to %d, missing %v); want a delta of 12:12",
			d.Kind, d.Missed, ns.KnownUpto, ns.Missing)
	}
}
