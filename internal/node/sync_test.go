package node

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A row refused CLIENT_ID_REUSED leaves the pending batch; the rest stays,
// in order.
func TestDropClientID(t *testing.T) {
	rows := func(ids ...string) []*castv1.Message {
		var out []*castv1.Message
		for _, id := range ids {
			out = append(out, &castv1.Message{ClientId: id})
		}
		return out
	}
	for _, tc := range []struct {
		name, cid string
		in, want  []string
	}{
		{"middle", "b", []string{"a", "b", "c"}, []string{"a", "c"}},
		{"twice", "b", []string{"b", "a", "b"}, []string{"a"}},
		{"absent", "z", []string{"a", "b"}, []string{"a", "b"}},
		{"no id in the error", "", []string{"a", ""}, []string{"a", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range dropClientID(rows(tc.in...), tc.cid) {
				got = append(got, m.ClientId)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// What others stored while a turn ran (between the turn's own rows) is
// missing from the native session although its KnownUpto passes it; what
// its rebuild wrote past the prompt (rebuilt) is not.
func TestSyncerMissing(t *testing.T) {
	for _, tc := range []struct {
		name          string
		ours, rebuilt []int64
		from          int64
		want          string
		newest        int64
	}{
		{"nothing stored", nil, nil, 4, "[]", 0},
		{"all ours", []int64{5, 6, 7}, nil, 4, "[]", 7},
		{"a message sent meanwhile", []int64{5, 6, 8}, nil, 4, "[7:7]", 8},
		{"runs merge", []int64{5, 9, 12}, nil, 4, "[6:8 10:11]", 12},
		{"a rebuild's answer past the prompt", []int64{6}, []int64{3, 5}, 4, "[]", 6},
		{"a rebuild's answer, nothing stored", nil, []int64{5}, 4, "[]", 5},
		{"a message sent after a rebuild's answer", []int64{7}, []int64{5}, 4, "[6:6]", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &syncer{ours: map[int64]bool{}, rebuilt: seqSet(tc.rebuilt)}
			for _, seq := range tc.ours {
				s.ours[seq], s.lastSeq = true, max(s.lastSeq, seq)
			}
			if got := fmt.Sprint(s.missing(tc.from, nil)); got != tc.want {
				t.Fatalf("missing(%d) = %s, want %s", tc.from, got, tc.want)
			}
			if got := s.newest(); got != tc.newest {
				t.Fatalf("newest() = %d, want %d", got, tc.newest)
			}
		})
	}
}

// away is a real NodeService on loopback that answers every append as a
// control plane that is away would (UNAVAILABLE), and says when it has
// been called enough.
type away struct {
	castv1.UnimplementedNodeServiceServer
	calls   atomic.Int32
	enough  int32
	reached chan struct{}
}

func (w *away) AppendOwnerMessages(context.Context, *castv1.AppendOwnerMessagesRequest) (*castv1.AppendOwnerMessagesResponse, error) {
	if w.calls.Add(1) == w.enough {
		close(w.reached)
	}
	return nil, status.Error(codes.Unavailable, "control plane away")
}

// A turn's last rows are stored again at the node's --reconnect-max
// pace, not a slower one of their own: 30 attempts at most 50 ms apart
// fit well inside 10 s (they took minutes when the pauses grew to 5 s).
func TestSyncerCloseRetriesAtReconnectMax(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	w := &away{enough: 30, reached: make(chan struct{})}
	castv1.RegisterNodeServiceServer(srv, w)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	cli, err := client.Dial(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	a := &Daemon{cfg: Config{Name: "laptop", ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond},
		lg: zap.NewNop(), cli: cli, m: newNodeMetrics(prometheus.NewRegistry())}
	s := &syncer{a: a, sessionID: "s1", o: owned{Token: 1, Agent: "claude"}, pending: []*castv1.Message{{ClientId: "c1"}},
		seen: map[string]time.Time{}, ours: map[int64]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	close(s.done) // no loop runs: close flushes by itself

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		select {
		case <-w.reached:
			cancel() // the node would go on until the control plane is back
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	err = s.close(ctx)
	if err == nil {
		t.Fatal("rows the control plane never stored reported as stored")
	}
	select {
	case <-w.reached:
	default:
		t.Fatalf("%d attempts in %s, want %d", w.calls.Load(), time.Since(start).Round(time.Millisecond), w.enough)
	}
}
