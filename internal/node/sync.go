package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/adopt"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/delivery"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/tick"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/wire"
)

// syncer streams what a running turn writes into the neutral copy: the
// runner emits native entries as they appear, the syncer batches them and
// appends them with the owner's token while the turn still runs.
type syncer struct {
	a         *Daemon
	sessionID string
	o         owned
	turnKey   string
	nativeKey string // the native session the turn resumes ("" for a fresh one)

	mu      sync.Mutex
	pending []transcript.Message // as the runner emitted them: fit to the message limit as sent
	seen    map[string]time.Time // client id -> when the runner read it (sync lag)
	n       int
	lastSeq int64
	ours    map[int64]bool // the seqs this turn stored
	rebuilt map[int64]bool // the seqs its rebuilt native session holds from the prompt on (turnSetup.rebuilt)
	err     error          // terminal (NOT_OWNER)
	lastErr error          // of the last append

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

const syncBatch = 200

// syncBatchBytes bounds the rows of one append (at least one goes): rows
// of megabytes each together passed the largest request the control plane
// takes (client.MaxRequestBytes), and the append was refused at every
// flush. Well under it, as the store's largest message is; a control
// plane configured lower has the node halve it (maxBatchBytes).
const syncBatchBytes = 4 << 20

func newSyncer(a *Daemon, sessionID string, o owned, t runner.Turn, rebuilt []int64) *syncer {
	s := &syncer{a: a, sessionID: sessionID, o: o, turnKey: fmt.Sprint(o.ReceivedSeq), nativeKey: t.NativeID,
		seen: map[string]time.Time{}, ours: map[int64]bool{}, rebuilt: seqSet(rebuilt),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s
}

// rekey has the rows emitted from now on keyed by nativeID: a turn run
// again on a rebuilt native session (rerunStale, rerunRebuilt) writes a new
// file, whose positional ids start over; keyed by the old one's id, they
// would reuse the client ids of that file's stored rows. rebuilt are the
// seqs that file holds from the prompt on (turnSetup.rebuilt).
func (s *syncer) rekey(nativeID string, rebuilt []int64) {
	s.mu.Lock()
	s.nativeKey, s.rebuilt = nativeID, seqSet(rebuilt)
	s.mu.Unlock()
}

func seqSet(seqs []int64) map[int64]bool {
	set := make(map[int64]bool, len(seqs))
	for _, seq := range seqs {
		set[seq] = true
	}
	return set
}

// emit is the runner's callback.
func (s *syncer) emit(m transcript.Message) {
	s.mu.Lock()
	if m.Agent == "" {
		m.Agent = s.o.Agent
	}
	switch {
	case strings.HasPrefix(m.NativeID, "line:"):
		// Positional ids (codex's "line:N") are unique per file only: a
		// rebuilt rollout numbers its lines from 1 again, so the file's
		// native id is part of the key.
		m.ClientID = clientID(s.sessionID, s.o.Agent, s.nativeKey, m.NativeID, 0)
	case m.NativeID != "":
		m.ClientID = clientID(s.sessionID, s.o.Agent, "", m.NativeID, 0)
	default:
		m.ClientID = clientID(s.sessionID, s.o.Agent, s.turnKey, "", s.n)
	}
	s.n++
	if _, ok := s.seen[m.ClientID]; !ok {
		s.seen[m.ClientID] = time.Now()
	}
	s.pending = append(s.pending, m)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *syncer) loop() {
	defer close(s.done)
	tick.Loop{Every: 300 * time.Millisecond, Wake: s.kick, Stop: s.stop}.Run(context.Background(), func() bool {
		s.flush(context.Background())
		return true
	})
}

// flush appends what is pending; a transient failure keeps it for later.
// Each row is fit to the store's message limit (a row over it, refused
// with its batch, was refused at every flush); a refusal naming a lower
// limit has the next flush fit to that. It reports whether it moved on:
// stored its batch, dropped a row the store already holds, or learned to
// send fewer rows at once (a control plane taking smaller requests).
func (s *syncer) flush(ctx context.Context) (progressed bool) {
	s.mu.Lock()
	if s.err != nil || len(s.pending) == 0 {
		s.mu.Unlock()
		return false
	}
	var batch []*castv1.Message
	limit, bound, size := s.a.maxMessageBytes(), s.a.maxBatchBytes(), 0
	for _, m := range s.pending[:min(len(s.pending), syncBatch)] {
		p := wire.ToProto(adopt.Fit(m, limit))
		n := proto.Size(p)
		if len(batch) > 0 && size+n > bound {
			break
		}
		batch, size = append(batch, p), size+n
	}
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	resp, err := s.a.cli.Nodes.AppendOwnerMessages(cctx, &castv1.AppendOwnerMessagesRequest{
		SessionId: s.sessionID, Node: s.a.cfg.Name, OwnerToken: s.o.Token, Messages: batch})
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastErr = err
	if err != nil {
		s.a.learnMessageLimit(err)
		if s.a.learnBatchLimit(err, size) && len(batch) > 1 {
			progressed = true // the next flush sends fewer rows, at once
		}
		switch client.ReasonOf(err) {
		case "NOT_OWNER":
			s.err = err
		case "CLIENT_ID_REUSED":
			// A row re-emitted under the id of a stored row with another
			// body (a turn run again after a restart numbers its rows from
			// 0 again): the stored row stands; the rest of the batch goes
			// on at the next flush.
			cid := client.MetadataOf(err, "client_id")
			n := len(s.pending)
			s.pending = dropClientID(s.pending, cid)
			delete(s.seen, cid)
			progressed = len(s.pending) < n
		}
		s.a.m.SyncFailures.Inc()
		s.a.lg.Warn("sync to control plane failed", zap.String("session", s.sessionID), zap.Error(err))
		return progressed
	}
	for _, m := range resp.Messages {
		s.lastSeq = max(s.lastSeq, m.Seq)
		s.ours[m.Seq] = true
	}
	lag := s.a.m.SyncLagSeconds.WithLabelValues(s.o.Agent)
	for _, m := range batch {
		if at, ok := s.seen[m.ClientId]; ok {
			lag.Observe(time.Since(at).Seconds())
			delete(s.seen, m.ClientId)
		}
	}
	s.pending = s.pending[len(batch):]
	return true
}

// close stops the loop and flushes the rest; it returns any terminal
// error. A control plane that is down or stopping
// (UNAVAILABLE, a canceled or timed-out call) is waited out for as long as
// ctx lives: the turn's rows are in no other place the node keeps, and a
// turn given up on would run its prompt again on a native session that
// holds it. Other errors are retried a bounded number of times. A flush
// that moved on is no failed attempt, and the next goes at once: the
// bound counted every append, so a turn with more than 21 batches left at
// its end (fewer after a control plane restart) gave up on rows the store
// was taking.
func (s *syncer) close(ctx context.Context) error {
	close(s.stop)
	<-s.done
	pauses := retry.SyncFlush(s.a.cfg.ReconnectMin, s.a.cfg.ReconnectMax).Pauses()
	for failed := 0; ; {
		progressed := s.flush(ctx)
		s.mu.Lock()
		left, err, last := len(s.pending), s.err, s.lastErr
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if left == 0 || ctx.Err() != nil {
			break
		}
		if progressed {
			pauses.Reset()
			continue
		}
		if failed++; failed > 20 && !transient(last) {
			break
		}
		tick.Sleep(ctx, pauses.Next())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) > 0 && ctx.Err() == nil {
		return rowsRefused{n: len(s.pending), err: s.lastErr}
	}
	if len(s.pending) > 0 {
		return fmt.Errorf("%d synced messages could not be stored", len(s.pending))
	}
	return nil
}

// rowsRefused is close's error when the control plane refused the turn's
// rows at every attempt, other than by being away (its store past its
// quota, say), rather than the node stopping first. Running the turn
// again would be refused the same way: the turn is held instead
// (outSyncRefused).
type rowsRefused struct {
	n   int
	err error // the last refusal
}

func (e rowsRefused) Error() string {
	return fmt.Sprintf("the control plane did not store %d rows of the turn: %v", e.n, e.err)
}
func (e rowsRefused) Unwrap() error { return e.err }

// transient reports whether a failed call may succeed later as it is: the
// control plane was unreachable, stopping, or slow.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded, codes.Aborted:
		return true
	}
	return false
}

// refusedForGood reports whether the control plane refused a call in a
// way no retry of the same request changes: malformed, about something
// gone (a purged session), or not this node's to make.
func refusedForGood(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.PermissionDenied:
		return true
	}
	return false
}

// dropClientID returns msgs without the rows with client id cid.
func dropClientID(msgs []transcript.Message, cid string) []transcript.Message {
	if cid == "" {
		return msgs
	}
	return slices.DeleteFunc(msgs, func(m transcript.Message) bool { return m.ClientID == cid })
}

// newest is the newest seq the native session holds from the turn: the
// turn's own rows and the rows its rebuild wrote. Call after close.
func (s *syncer) newest() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.lastSeq
	for seq := range s.rebuilt {
		n = max(n, seq)
	}
	return n
}

// missing are the seq ranges after from, up to newest, that the turn did
// not store, its rebuild did not write, and the native session did not
// hold before it (held; nil: none): what others wrote meanwhile (a message
// sent while the turn ran), which the native session does not hold although
// its KnownUpto passes them. Call after close.
func (s *syncer) missing(from int64, held func(seq int64) bool) []delivery.Range {
	upto := s.newest()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []delivery.Range
	for seq := from + 1; seq <= upto; seq++ {
		switch {
		case s.ours[seq], s.rebuilt[seq], held != nil && held(seq):
		case len(out) > 0 && out[len(out)-1].To == seq-1:
			out[len(out)-1].To = seq
		default:
			out = append(out, delivery.Range{From: seq, To: seq})
		}
	}
	return out
}
