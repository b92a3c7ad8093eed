package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/faults"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// long is `make faults` (CAST_FAULTS=long): more writers, more messages,
// more fault cycles, and a table of every fault's counts at the end. The
// default is the short mode CI runs.
var long = os.Getenv("CAST_FAULTS") == "long"

// phase is how many acknowledgements a workload phase waits for, and
// phaseWait how long it may take.
var (
	phase     = scale(15, 150)
	phaseWait = time.Duration(scale(60, 300)) * time.Second
)

// scale picks the short or the long figure.
func scale(short, longer int) int {
	if long {
		return longer
	}
	return short
}

var (
	reportsMu sync.Mutex
	reports   []faults.Report
)

func TestMain(m *testing.M) {
	testharness.RunEtcdMemberIfAsked() // the HA test's etcd members are this binary
	code := m.Run()
	if long {
		fmt.Print(faults.Table(reports))
	}
	testharness.RemoveBinaries()
	os.Exit(code)
}

// check runs the checker and fails t on any finding; the report goes into
// the long mode's table.
func check(t *testing.T, ck faults.Checker, fault string, acks []faults.Ack) faults.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := ck.Check(ctx, fault, acks)
	if err != nil {
		t.Fatalf("checker: %v", err)
	}
	reportsMu.Lock()
	reports = append(reports, r)
	reportsMu.Unlock()
	if !r.OK() {
		t.Errorf("%s", r)
	} else {
		t.Log(r.String())
	}
	return r
}

// load is a bounded workload of writers that send messages of mixed sizes
// to a few sessions and retry each one with its request id while the
// outcome is unknown, as `cast send` does. It keeps what was acknowledged
// for the checker, and every error code it saw.
type load struct {
	c        castv1.SessionServiceClient
	sessions []string
	sizes    []int         // body sizes, cycled; > smallMax go through AppendMessages
	timeout  time.Duration // per call
	permits  chan struct{} // one per message the writers may start

	mu       sync.Mutex
	acks     []faults.Ack
	times    []ackTime // times[i] is when acks[i]'s acknowledged attempt ran
	fails    int
	codes    map[codes.Code]int
	slowest  time.Duration
	firstErr error
}

// smallMax: bodies up to this size are user messages (SendMessage, which
// the owner node is handed); larger ones are agent rows (AppendMessages),
// the size of tool output.
const smallMax = 4 << 10

func newLoad(c castv1.SessionServiceClient, sessions []string, sizes ...int) *load {
	if len(sizes) == 0 {
		// 300 KiB is chunked: a retry must never touch what was committed.
		sizes = []int{64, 2 << 10, 40 << 10, 300 << 10}
	}
	return &load{c: c, sessions: sessions, sizes: sizes, timeout: 3 * time.Second, codes: map[codes.Code]int{},
		permits: make(chan struct{}, 1<<16)}
}

// start starts writers goroutines that send one message per permit (see
// allow), for at most limit; the returned func stops them and waits (it
// may be called more than once). Permits keep the workload where the test
// is: writers that ran ahead on a fast machine would be done before the
// fault they are meant to meet.
func (l *load) start(writers int, limit time.Duration) (stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				case <-l.permits:
				}
				sess := l.sessions[rnd.IntN(len(l.sessions))]
				l.sendOne(ctx, sess, l.sizes[(w+i)%len(l.sizes)], rnd)
			}
		}()
	}
	return sync.OnceFunc(func() { close(done); wg.Wait(); cancel() })
}

// allow lets the writers send n more messages.
func (l *load) allow(n int) {
	for range n {
		l.permits <- struct{}{}
	}
}

// phase lets n more messages go and waits until they are acknowledged.
func (l *load) phase(t *testing.T, n int, timeout time.Duration, what string) {
	t.Helper()
	target := l.acked() + n
	l.allow(n)
	testharness.WaitFor(t, timeout, what, func() bool { return l.acked() >= target })
}

// body is size bytes of printable text that names its request id, so a
// message read back in another's place shows.
func body(id string, size int, rnd *rand.Rand) string {
	var b strings.Builder
	b.Grow(size)
	b.WriteString(id)
	b.WriteByte(' ')
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	for b.Len() < size {
		b.WriteByte(letters[rnd.IntN(len(letters))])
	}
	return b.String()[:max(size, len(id))]
}

// sendOne sends one message and retries it with the same id until it is
// acknowledged, refused for good, or ctx ends (then it may or may not be
// stored: not acknowledged, so not checked).
func (l *load) sendOne(ctx context.Context, sess string, size int, rnd *rand.Rand) {
	id := ids.NewClientID()
	text := body(id, size, rnd)
	for attempt := 0; attempt < 1000 && ctx.Err() == nil; attempt++ {
		start := time.Now()
		seq, err := l.attempt(ctx, sess, id, text)
		took := time.Since(start)
		if err == nil {
			l.mu.Lock()
			l.acks = append(l.acks, faults.Ack{Session: sess, ClientID: id, Seq: seq, Body: []byte(text)})
			l.times = append(l.times, ackTime{start: start, took: took})
			l.slowest = max(l.slowest, took)
			l.mu.Unlock()
			return
		}
		if ctx.Err() != nil {
			return
		}
		code := status.Code(err)
		l.mu.Lock()
		l.fails++
		l.codes[code]++
		if !retryable(code) && l.firstErr == nil {
			l.firstErr = fmt.Errorf("send %s to %s: %w", id, sess, err)
		}
		l.mu.Unlock()
		if !retryable(code) {
			return
		}
		select { // back off a little; the retry is the same request
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (l *load) attempt(ctx context.Context, sess, id, text string) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if len(text) <= smallMax {
		resp, err := l.c.SendMessage(cctx, &castv1.SendMessageRequest{SessionId: sess, Text: text, RequestId: id})
		if err != nil {
			return 0, err
		}
		return resp.Message.Seq, nil
	}
	resp, err := l.c.AppendMessages(cctx, &castv1.AppendMessagesRequest{SessionId: sess, Messages: []*castv1.Message{{
		ClientId: id, Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: text, Agent: "claude"}}})
	if err != nil {
		return 0, err
	}
	return resp.Messages[0].Seq, nil
}

// retryable are the outcomes a client cannot tell from a lost answer:
// the only clean ways for a write to fail while the store is away.
func retryable(c codes.Code) bool {
	return c == codes.Unavailable || c == codes.DeadlineExceeded
}

func (l *load) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

func (l *load) failed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fails
}

// ackTime is when an acknowledged attempt started and how long it took.
type ackTime struct {
	start time.Time
	took  time.Duration
}

// fastestBetween is the quickest acknowledged attempt that ran wholly
// between from and to, and how many there were.
func (l *load) fastestBetween(from, to time.Time) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var fastest time.Duration
	n := 0
	for _, at := range l.times {
		if at.start.Before(from) || at.start.Add(at.took).After(to) {
			continue
		}
		if n == 0 || at.took < fastest {
			fastest = at.took
		}
		n++
	}
	return fastest, n
}

// snapshot returns the acknowledgements so far.
func (l *load) snapshot() []faults.Ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]faults.Ack(nil), l.acks...)
}

// clean fails t if any write failed other than cleanly (unavailable or
// deadline exceeded).
func (l *load) clean(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.firstErr != nil {
		t.Errorf("a write failed other than cleanly: %v (codes %v)", l.firstErr, l.codes)
	}
}

// summary is one line of what the writers saw.
func (l *load) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var cs []string
	for c, n := range l.codes {
		cs = append(cs, fmt.Sprintf("%s=%d", c, n))
	}
	sort.Strings(cs)
	return fmt.Sprintf("%d acknowledged, %d failed attempts (%s), slowest ack %s", len(l.acks), l.fails, strings.Join(cs, " "), l.slowest.Round(time.Millisecond))
}
