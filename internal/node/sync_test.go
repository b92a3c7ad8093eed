package node

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/transcript"
)

// A row refused CLIENT_ID_REUSED leaves the pending batch; the rest stays,
// in order.
func TestDropClientID(t *testing.T) {
	rows := func(ids ...string) []transcript.Message {
		var out []transcript.Message
		for _, id := range ids {
			out = append(out, transcript.Message{ClientID: id})
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
				got = append(got, m.ClientID)
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

// syncDaemon is a daemon whose control plane is svc, a real NodeService
// on loopback taking requests as large as the control plane's, with the
// reconnect pace of a test.
func syncDaemon(t *testing.T, svc castv1.NodeServiceServer) *Daemon {
	t.Helper()
	return syncDaemonTaking(t, svc, client.MaxRequestBytes)
}

// syncDaemonTaking is syncDaemon whose server takes requests of at most
// maxRecv bytes, as a control plane's MaxRecvBytes bounds them.
func syncDaemonTaking(t *testing.T, svc castv1.NodeServiceServer, maxRecv int) *Daemon {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxRecv))
	castv1.RegisterNodeServiceServer(srv, svc)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	cli, err := client.Dial(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &Daemon{cfg: Config{Name: "laptop", ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond},
		lg: zap.NewNop(), cli: cli, m: newNodeMetrics(prometheus.NewRegistry())}
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
	w := &away{enough: 30, reached: make(chan struct{})}
	a := syncDaemon(t, w)
	s := &syncer{a: a, sessionID: "s1", o: owned{Token: 1, Agent: "claude"}, pending: []transcript.Message{{ClientID: "c1"}},
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
	err := s.close(ctx)
	if err == nil {
		t.Fatal("rows the control plane never stored reported as stored")
	}
	select {
	case <-w.reached:
	default:
		t.Fatalf("%d attempts in %s, want %d", w.calls.Load(), time.Since(start).Round(time.Millisecond), w.enough)
	}
}

// sizeLimited is a real NodeService on loopback that stores appends as
// the control plane's store does as to size: a batch holding a message
// over limit bytes encoded is refused whole, MESSAGE_TOO_LARGE naming the
// limit.
type sizeLimited struct {
	castv1.UnimplementedNodeServiceServer
	limit  int
	mu     sync.Mutex
	stored []*castv1.Message
}

func (s *sizeLimited) AppendOwnerMessages(_ context.Context, req *castv1.AppendOwnerMessagesRequest) (*castv1.AppendOwnerMessagesResponse, error) {
	for _, m := range req.Messages {
		if n := proto.Size(m); n > s.limit {
			st, err := status.Newf(codes.ResourceExhausted, "message is %d bytes; the limit is %d", n, s.limit).
				WithDetails(&errdetails.ErrorInfo{Reason: errs.ReasonMessageTooLarge, Metadata: map[string]string{"limit_bytes": fmt.Sprint(s.limit)}})
			if err != nil {
				return nil, err
			}
			return nil, st.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &castv1.AppendOwnerMessagesResponse{}
	for _, m := range req.Messages {
		m.Seq = int64(len(s.stored) + 1)
		s.stored = append(s.stored, m)
		out.Messages = append(out.Messages, &castv1.Message{Seq: m.Seq, ClientId: m.ClientId})
	}
	return out, nil
}

// A row of cast's own turn over the store's message limit is stored cut
// to it, saying what was left out, and the rows after it are stored too:
// before, the store refused its batch at every flush and the turn's sync
// failed. Both the store's default limit and a lower one a control plane
// is configured with (learned from its refusal).
func TestSyncerFitsARowOverTheMessageLimit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limit, row int
	}{
		{"the default limit", 8 << 20, 9 << 20},
		{"a lower limit", 1 << 20, 2 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &sizeLimited{limit: tc.limit}
			s := newSyncer(syncDaemon(t, store), "s1", owned{Token: 1, Agent: "claude"}, runner.Turn{}, nil)
			s.emit(transcript.Message{Kind: transcript.KindToolCall, NativeID: "c1", ToolCall: &transcript.ToolCall{ID: "t1", Name: "Bash", Input: "{}"}})
			s.emit(transcript.Message{Kind: transcript.KindToolResult, NativeID: "r1",
				ToolResult: &transcript.ToolResult{CallID: "t1", Output: strings.Repeat("build log line\n", tc.row/15)}})
			s.emit(transcript.Message{Kind: transcript.KindAssistant, NativeID: "a1", Text: "the build passed"})
			stored := closeSynced(t, s, store)
			if len(stored) != 3 || stored[2].Text != "the build passed" {
				t.Fatalf("stored %d rows, want the 3 in order", len(stored))
			}
			if res := stored[1]; proto.Size(res) > tc.limit || !strings.HasPrefix(res.ToolResult.GetOutput(), "build log line") ||
				!strings.Contains(res.Text, "left out") {
				t.Fatalf("the large row is stored as %d bytes, text %q", proto.Size(res), res.Text)
			}
		})
	}
}

// Rows of a turn that together pass the largest request the control plane
// takes (client.MaxRequestBytes: three tool results of 6 MiB synced in one
// flush) are sent in several appends: before, the one append was refused
// at every flush and none of them was stored.
func TestSyncerBatchesStayUnderTheRequestLimit(t *testing.T) {
	store := &sizeLimited{limit: 8 << 20}
	s := newSyncer(syncDaemon(t, store), "s1", owned{Token: 1, Agent: "claude"}, runner.Turn{}, nil)
	s.mu.Lock() // the three arrive before the loop flushes
	for i := range 3 {
		s.pending = append(s.pending, transcript.Message{Kind: transcript.KindToolResult, ClientID: fmt.Sprint("r", i), Agent: "claude",
			ToolResult: &transcript.ToolResult{CallID: fmt.Sprint("t", i), Output: strings.Repeat("x", 6<<20)}})
	}
	s.mu.Unlock()
	if stored := closeSynced(t, s, store); len(stored) != 3 {
		t.Fatalf("stored %d rows, want 3", len(stored))
	}
}

// A control plane configured to take requests under the node's batch
// size (4 MiB) refused every append of a turn whose rows passed it: gRPC
// refuses the request before any handler (RESOURCE_EXHAUSTED, no reason),
// at every flush, and the turn's sync failed. The node sends smaller
// batches after such a refusal, and every row is stored.
func TestSyncerBatchesShrinkToWhatTheServerTakes(t *testing.T) {
	store := &sizeLimited{limit: 512 << 10}
	s := newSyncer(syncDaemonTaking(t, store, 1<<20), "s1", owned{Token: 1, Agent: "claude"}, runner.Turn{}, nil)
	s.mu.Lock() // all arrive before the loop flushes: 3 MiB in one batch
	for i := range 10 {
		s.pending = append(s.pending, transcript.Message{Kind: transcript.KindToolResult, ClientID: fmt.Sprint("r", i), Agent: "claude",
			ToolResult: &transcript.ToolResult{CallID: fmt.Sprint("t", i), Output: strings.Repeat("x", 300<<10)}})
	}
	s.mu.Unlock()
	stored := closeSynced(t, s, store)
	if len(stored) != 10 || stored[9].ClientId != "r9" {
		t.Fatalf("stored %d rows, want the 10 in order", len(stored))
	}
}

// closeSynced closes s, which must store all it holds, and returns what
// store holds then.
func closeSynced(t *testing.T, s *syncer, store *sizeLimited) []*castv1.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	return slices.Clone(store.stored)
}

// reusing is sizeLimited whose store already holds the client ids in
// taken with other bodies: it refuses a batch holding one, naming it
// (CLIENT_ID_REUSED), as the store does.
type reusing struct {
	sizeLimited
	taken map[string]bool
}

func (s *reusing) AppendOwnerMessages(ctx context.Context, req *castv1.AppendOwnerMessagesRequest) (*castv1.AppendOwnerMessagesResponse, error) {
	for _, m := range req.Messages {
		if s.taken[m.ClientId] {
			st, err := status.Newf(codes.AlreadyExists, "client_id %q was used for another message", m.ClientId).
				WithDetails(&errdetails.ErrorInfo{Reason: errs.ReasonClientIDReused, Metadata: map[string]string{"client_id": m.ClientId}})
			if err != nil {
				return nil, err
			}
			return nil, st.Err()
		}
	}
	return s.sizeLimited.AppendOwnerMessages(ctx, req)
}

// Closing a turn's syncer stores every row it still holds, however many
// appends that takes: it gave up after 21 of them even when each one
// stored its batch (more than 4,200 rows left at the turn's end, fewer
// after a control plane restart had failed some attempts), or dropped a
// row the store already held under its client id (a rerun after a
// restart), and the turn whose rows were all storable failed to sync.
func TestSyncerCloseStoresEveryBatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rows  int
		taken int // the first rows' client ids, stored with other bodies
	}{
		{"more batches than attempts", 21*syncBatch + 1, 0},
		{"more reused client ids than attempts", 30, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &reusing{sizeLimited: sizeLimited{limit: 8 << 20}, taken: map[string]bool{}}
			s := newSyncer(syncDaemon(t, store), "s1", owned{Token: 1, Agent: "claude"}, runner.Turn{}, nil)
			s.mu.Lock() // they arrive before the loop flushes
			for i := range tc.rows {
				cid := fmt.Sprint("a", i)
				if i < tc.taken {
					store.taken[cid] = true
				}
				s.pending = append(s.pending, transcript.Message{Kind: transcript.KindAssistant, ClientID: cid, Agent: "claude", Text: "step"})
			}
			s.mu.Unlock()
			if stored := closeSynced(t, s, &store.sizeLimited); len(stored) != tc.rows-tc.taken {
				t.Fatalf("stored %d rows, want %d", len(stored), tc.rows-tc.taken)
			}
		})
	}
}
