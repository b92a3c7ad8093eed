package node

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/validate"
	"github.com/cast-dev/cast/internal/wire"
)

// A turn's failure reason comes from the CLI's stderr (clipped by bytes
// in the runner too); whatever it holds, the reason the node keeps and
// sends must be one the control plane takes. One cut in the middle of a
// character, or stderr that is not UTF-8, was not: the ReportTurn request
// failed to marshal, the pending report was sent again forever, and the
// worker, which flushes it before each turn, left the session `running`
// with no turn behind it and never ran another.
func TestClipReasonIsAlwaysReportable(t *testing.T) {
	for _, tc := range []struct{ name, reason string }{
		{"cut inside a character", "x" + strings.Repeat("é", 600)},
		{"cut inside a wide character", "xx" + strings.Repeat("日本", 400)},
		{"latin-1 stderr", "erreur: fichier introuvable \xe9t\xe9"},
		{"NUL in stderr", "exit 1: bad\x00byte"},
		{"plain", "exit 1: not logged in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clipReason(tc.reason)
			if err := validate.Check(validate.Reason, "state_reason", got); err != nil {
				t.Errorf("clipReason(%s) is refused: %v", validate.Show(tc.reason), err)
			}
			if _, err := proto.Marshal(&castv1.ReportTurnRequest{StateReason: got}); err != nil {
				t.Errorf("a report with clipReason(%s) cannot be sent: %v", validate.Show(tc.reason), err)
			}
			if len(got) > 1000+len("…") {
				t.Errorf("clipReason kept %d bytes", len(got))
			}
		})
	}
	if got := clipReason("exit 1: not logged in"); got != "exit 1: not logged in" {
		t.Errorf("a short valid reason was changed: %q", got)
	}
}

// A fleet turn's usage windows come from the CLI's output; a report the
// control plane refuses is refused at every retry, leaving the session
// `running` and its worker stuck. Windows it would refuse (a reset time
// in milliseconds read as seconds, a percentage that is not one, a model
// name it does not take) are left out, the others kept; the report is
// one the control plane's own check takes.
func TestReportUsageIsAlwaysReportable(t *testing.T) {
	good := quota.Window{Name: "five_hour", UsedPercent: 42, WindowMinutes: 300, ResetsAt: time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		name string
		bad  quota.Window
	}{
		{"reset time in milliseconds", quota.Window{Name: "primary", UsedPercent: 10, WindowMinutes: 300, ResetsAt: time.Unix(1796540400000, 0)}},
		{"not a percentage", quota.Window{Name: "secondary", UsedPercent: math.NaN(), WindowMinutes: 10080}},
		{"a percentage past any limit", quota.Window{Name: "secondary", UsedPercent: 52000, WindowMinutes: 10080}},
		{"a model name with a space", quota.Window{Name: "seven_day", UsedPercent: 1, WindowMinutes: 10080, Model: "opus 4"}},
		{"a window longer than a year", quota.Window{Name: "yearly", UsedPercent: 1, WindowMinutes: 400 * 24 * 60}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Daemon{cfg: Config{Name: "n1"}, lg: zap.NewNop()}
			req := a.reportRequest("s1", owned{Token: 1}, turnReport{State: castv1.SessionState_SESSION_STATE_IDLE, FleetAccount: "work", Usage: []quota.Window{good, tc.bad}})
			if err := wire.CheckWindows(req.Usage); err != nil {
				t.Fatalf("the control plane refuses the report: %v", err)
			}
			if len(req.Usage) != 1 || req.Usage[0].Name != good.Name {
				t.Fatalf("reported windows %v, want only %s", req.Usage, good.Name)
			}
		})
	}
}

// A pending turn report the control plane refuses for good (the session
// purged: NOT_FOUND; a request it never takes: INVALID_ARGUMENT; a node
// it does not let write: PERMISSION_DENIED) is dropped with a log line
// and counted, and the worker goes on to the session's next turn. It was
// sent again for ever, and the worker, which flushes it before each turn,
// never ran another. A refusal for now (UNAVAILABLE, a rate limit) is
// still sent again until it lands.
func TestPendingReportRefusedForGoodIsDropped(t *testing.T) {
	for _, tc := range []struct {
		code    codes.Code
		dropped bool
	}{
		{codes.NotFound, true},
		{codes.InvalidArgument, true},
		{codes.PermissionDenied, true},
		{codes.Unavailable, false},
		{codes.ResourceExhausted, false},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			t.Parallel()
			a, p := rerunDaemon(t, fakemodel.Start(t))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := a.st.assign("s1", func(o *owned) {
				o.Token, o.Agent, o.Cwd = 1, "claude", t.TempDir()
				o.Report = &turnReport{State: castv1.SessionState_SESSION_STATE_IDLE, Pending: true}
			}); err != nil {
				t.Fatal(err)
			}
			p.mu.Lock()
			p.reportsDown, p.reportCode = true, tc.code
			p.mu.Unlock()
			flushed := make(chan bool, 1)
			go func() { flushed <- a.flushReport(ctx, "s1") }()
			if !tc.dropped {
				<-p.reportRefused
				p.up() // the refusal was for now: the report lands once taken
			}
			if !<-flushed || ctx.Err() != nil {
				t.Fatalf("the pending report refused %s held the session's worker (flushed: %v)", tc.code, ctx.Err())
			}
			if o, _ := a.st.get("s1"); o.Report.Pending {
				t.Fatalf("the report refused %s is still pending", tc.code)
			}
			dropped := metrics.Value(a.m.ReportsDropped)
			if want := map[bool]float64{true: 1, false: 0}[tc.dropped]; dropped != want {
				t.Fatalf("%v reports counted dropped after a refusal %s, want %v", dropped, tc.code, want)
			}
		})
	}
}

// A turn whose start the control plane refuses for good (here a delivery
// cursor past the session's last seq, as after a restore of its store)
// ends failed, with the refusal as its reason, and its messages run with
// the next one, once each. It was held and tried again at every wake: the
// messages never ran and the session showed nothing.
func TestTurnWhoseStartIsRefusedForGoodEndsFailed(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p, ctx := workerDaemon(t, fm)
	setUpSession(t, a, p, nil)
	p.mu.Lock()
	p.cursorPast = true
	p.mu.Unlock()
	o, _ := a.st.get("s1")
	if err := a.runTurn(ctx, "s1", o); err == nil || errors.Is(err, errHeld) {
		t.Fatalf("the turn whose start was refused for good ended %v, want a failure", err)
	}
	if o, _ := a.st.get("s1"); o.DeliveredSeq != 2 || o.FailedSeq != 3 {
		t.Fatalf("delivered seq %d, failed seq %d; want 2 and 3 (the messages held until the next one)", o.DeliveredSeq, o.FailedSeq)
	}
	flushedAs(ctx, t, a, p, castv1.SessionState_SESSION_STATE_FAILED)
	p.mu.Lock()
	reason := p.reasons[len(p.reasons)-1]
	p.cursorPast = false // the store reaches the cursor again
	p.mu.Unlock()
	if !strings.Contains(reason, "past the session's last seq") {
		t.Fatalf("the session's reason %q does not say what was refused", reason)
	}

	next := p.add("s1", &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "third question", ClientId: "u3"})
	if err := a.deliver("s1", 1, next); err != nil {
		t.Fatal(err)
	}
	idleAt(ctx, t, a, p, next[0].Seq)
	turns := fm.Turns()
	users := strings.Join(userTexts(turns[len(turns)-1]), "\n")
	for _, q := range []string{"first question", "second question", "third question"} {
		if n := strings.Count(users, q); n != 1 {
			t.Fatalf("the next model request holds %q %d times, want once; user items %q", q, n, users)
		}
	}
}

// A turn's end report the control plane refuses for good still ends the
// turn there: its state and reason land, with the delivery cursor unless
// the cursor is what was refused. The whole report was dropped, and a
// session whose turn start was recorded showed running with no process;
// then its state landed alone, without a cursor the control plane takes
// (a refused cwd), so the store's cursor stayed behind the node's and a
// later move (a migration, or this node's next assignment, which takes
// the store's cursor) ran again the messages this node had run.
func TestEndReportRefusedForGoodLandsItsState(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse func(p *plane)
		cursor int64 // the landed report's delivery cursor
	}{
		{"its delivery cursor", func(p *plane) { p.cursorPast = true }, 0},
		{"its cwd", func(p *plane) { p.cwdRefused = true }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, p := rerunDaemon(t, fakemodel.Start(t))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := a.st.assign("s1", func(o *owned) {
				o.Token, o.Agent, o.Cwd, o.WorktreeBranch, o.ReceivedSeq, o.DeliveredSeq = 1, "claude", t.TempDir(), "feature", 3, 3
				o.Report = &turnReport{State: castv1.SessionState_SESSION_STATE_IDLE, Pending: true}
			}); err != nil {
				t.Fatal(err)
			}
			p.mu.Lock()
			tc.refuse(p)
			p.mu.Unlock()
			flushedAs(ctx, t, a, p, castv1.SessionState_SESSION_STATE_IDLE)
			if o, _ := a.st.get("s1"); o.Report.Pending {
				t.Fatal("the report is still pending")
			}
			if dropped := metrics.Value(a.m.ReportsDropped); dropped != 0 {
				t.Fatalf("%v reports counted dropped; its state landed", dropped)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if got := p.delivered[len(p.delivered)-1]; got != tc.cursor {
				t.Fatalf("the report that landed carries delivery cursor %d, want %d", got, tc.cursor)
			}
		})
	}
}

// flushedAs flushes s1's pending report and fails unless one landed with
// state want (the session would show nothing of the turn's end).
func flushedAs(ctx context.Context, t *testing.T, a *Daemon, p *plane, want castv1.SessionState) {
	t.Helper()
	if !a.flushReport(ctx, "s1") {
		t.Fatal("flushing the report dropped the session")
	}
	select {
	case st := <-p.reports:
		if st != want {
			t.Fatalf("the session shows %s, want %s", st, want)
		}
	default:
		t.Fatalf("no report landed: the session does not show the turn ended %s", want)
	}
}
