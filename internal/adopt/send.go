package adopt

import (
	"context"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/transcript"
)

// send hands fresh messages to the sink, in batches.
func (f *Follower) send(ctx context.Context, agent string, o origin, st *fileState, fresh []transcript.Message) (int, error) {
	if len(fresh) == 0 {
		return 0, nil
	}
	s := f.sender(ctx, agent, o, st, title(fresh, o.Path), int64(len(fresh)))
	for _, m := range fresh {
		if err := s.add(m); err != nil {
			return s.sent, err
		}
	}
	return s.done()
}

// batcher hands fresh messages to the sink in batches as they come,
// recording each batch kept in the file's state.
type batcher struct {
	f    *Follower
	ctx  context.Context
	o    origin
	st   *fileState
	b    Batch
	part []transcript.Message // as sent: each fit to limit
	orig []transcript.Message // part as read, to fit again to a lower limit
	size int
	sent int
	// limit is the message size part is fit to (Sink.MaxMessageBytes).
	limit int
	// scratch: a new session that ran in a scratch folder of cast's
	// (Cast.Scratch), of which nothing is sent.
	scratch bool
}

// sender is a batcher for o's fresh messages; a new session's first
// batch says its title and how many messages it holds in all (history).
func (f *Follower) sender(ctx context.Context, agent string, o origin, st *fileState, title string, history int64) *batcher {
	b := Batch{Agent: agent, NativeID: st.NativeID, Path: o.Path, SessionID: st.SessionID}
	scratch := false
	if st.SessionID == "" {
		// A probe's session its removal missed (a CLI stopped before it
		// said the id, a node killed mid-probe) is no session of the
		// user's; its state is kept as any other's, so it is not read
		// again until it changes.
		scratch = o.Cwd != "" && f.cast.Scratch(o.Cwd)
		if scratch {
			f.lg.Debug("native session of cast's scratch folder not adopted", zap.String("agent", agent), zap.String("path", o.Key), zap.String("cwd", o.Cwd))
		}
		b.Cwd, b.Title, b.History = o.Cwd, title, history
		b.ParentNativeID, b.ParentSessionID, b.ParentCallID = o.ParentNativeID, o.ParentSessionID, o.CallID
		if b.ParentNativeID != "" {
			// A run a turn of cast's own started: that cast session's worker.
			if sid := f.cast.SessionOf(agent, b.ParentNativeID); sid != "" {
				b.ParentNativeID, b.ParentSessionID = "", sid
			}
		}
	}
	return &batcher{f: f, ctx: ctx, o: o, st: st, b: b, limit: f.sink.MaxMessageBytes(), scratch: scratch}
}

// add queues m (fit to what the store takes), first sending the batch
// queued when m would take it past its bounds (batchMsgs, bound).
func (s *batcher) add(m transcript.Message) error {
	fm := Fit(m, s.limit)
	sz := bodySize(fm)
	if len(s.part) > 0 && (len(s.part) >= batchMsgs || s.size+sz > s.bound()) {
		if err := s.flush(); err != nil {
			return err
		}
	}
	s.part, s.orig, s.size = append(s.part, fm), append(s.orig, m), s.size+sz
	return nil
}

// bound is the most a batch carries: batchBytes, or less when the sink
// learned the control plane takes less.
func (s *batcher) bound() int {
	if l := s.f.sink.MaxBatchBytes(); l > 0 {
		return min(l, batchBytes)
	}
	return batchBytes
}

// lead is how many of the queued messages go in one Adopt under bound (at
// least one).
func (s *batcher) lead() int {
	n, size := 0, 0
	for _, m := range s.part {
		if size += bodySize(m); n > 0 && size > s.bound() {
			break
		}
		n++
	}
	return n
}

// flush sends the batch queued. Refused, and the sink has learned a lower
// limit from the refusal (a control plane configured below the store's
// default), the batch is fit to that and sent again; or a lower batch
// bound (a control plane taking smaller requests), and it goes in parts
// under that. Each learned limit is lower than the last, so this ends.
func (s *batcher) flush() error {
	for len(s.part) > 0 && !s.scratch {
		n := s.lead()
		s.b.Messages = s.part[:n]
		id, err := s.f.sink.Adopt(s.ctx, s.b)
		if l := s.f.sink.MaxMessageBytes(); err != nil && maxBody(l) < maxBody(s.limit) {
			s.limit = l
			for i, m := range s.orig {
				s.part[i] = Fit(m, l)
			}
			continue
		}
		if err != nil && n > 1 && s.lead() < n {
			continue
		}
		if err != nil {
			return err
		}
		s.b.SessionID, s.st.SessionID = id, id
		for _, m := range s.part[:n] {
			s.st.Sent[digestOf(m.ClientID)]++
			s.size -= bodySize(m)
		}
		s.sent += n
		// What is left is a new slice: the sink may keep the batch sent.
		s.part, s.orig = slices.Clone(s.part[n:]), slices.Clone(s.orig[n:])
		if err := s.f.st.put(s.o.Key, s.st); err != nil {
			return err
		}
	}
	s.part, s.orig, s.size = nil, nil, 0
	return nil
}

// done sends what is queued and says how many messages went.
func (s *batcher) done() (int, error) {
	err := s.flush()
	if s.sent > 0 {
		s.f.lg.Info("native session adopted", zap.String("agent", s.b.Agent), zap.String("path", s.o.Key),
			zap.String("session", s.st.SessionID), zap.Int("messages", s.sent))
	}
	return s.sent, err
}

// unsent are msgs less those already kept (sent counts each digest's
// occurrences kept; from, those before msgs), each given its client id.
func unsent(sent, from map[string]int, msgs []transcript.Message) []transcript.Message {
	u := fresh{sent: sent, seen: from}
	var k keptAfter
	var out []transcript.Message
	add := func(m transcript.Message) error {
		out = append(out, m)
		return nil
	}
	for _, m := range msgs {
		isNew := u.take(&m)
		_ = k.next(m, isNew, add)
	}
	_ = k.flush(add)
	return out
}

// keptAfter holds a compaction summary not kept yet until the next
// message not kept yet, or the file's end: the user's messages kept
// already between them are ones the CLI kept verbatim after its summary
// (Gemini writes its session anew as the summary and the newest
// entries). The session holds them before the notice and a rebuild
// starts at the notice, so the notice holds them (transcript.WithKept).
type keptAfter struct {
	held *transcript.Message
	kept []string
}

// next hands m to out when it is not kept yet (isNew), after the summary
// held.
func (k *keptAfter) next(m transcript.Message, isNew bool, out func(transcript.Message) error) error {
	if !isNew {
		if k.held != nil && m.Kind == transcript.KindUser && strings.TrimSpace(m.Text) != "" {
			k.kept = append(k.kept, m.Text)
		}
		return nil
	}
	if err := k.flush(out); err != nil {
		return err
	}
	if m.Kind == transcript.KindNotice && m.NoticeType == transcript.NoticeCompactionSummary {
		k.held = &m
		return nil
	}
	return out(m)
}

// flush hands out the summary held.
func (k *keptAfter) flush(out func(transcript.Message) error) error {
	if k.held == nil {
		return nil
	}
	m := *k.held
	m.Text = transcript.WithKept(m.Text, k.kept)
	k.held, k.kept = nil, nil
	return out(m)
}

// fresh tells the messages not kept yet among a file's, read in order:
// sent counts each digest's occurrences kept, seen those read so far
// (from the file's start; for a tail, all kept).
type fresh struct{ sent, seen map[string]int }

// take says whether m is not kept yet, and then gives it its client id.
func (u fresh) take(m *transcript.Message) bool {
	d := digest(*m)
	u.seen[d]++
	if u.seen[d] <= u.sent[d] {
		return false
	}
	m.Seq, m.ClientID = 0, clientID(d, u.seen[d])
	return true
}
