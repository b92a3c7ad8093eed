package agents

import (
	"strings"

	"github.com/cast-dev/cast/internal/transcript"
)

// sinceCompaction writes what follows the last compaction summary
// (transcript.SinceCompaction): every writer honours a compaction, whichever
// agent made it.
type sinceCompaction struct{ w Writer }

func (s sinceCompaction) Write(t Target, msgs []transcript.Message) (Written, error) {
	return s.w.Write(t, transcript.SinceCompaction(msgs))
}

// WriteStream keeps a streaming writer streaming (a restore of a session
// larger than memory): the wrapper must not hide StreamWriter, or WriteFrom
// read the whole session into memory for Write. A writer that does not
// stream gets Write, as WriteFrom gives it.
func (s sinceCompaction) WriteStream(t Target, msgs MessageSource) (Written, error) {
	sw, ok := s.w.(StreamWriter)
	if !ok {
		all, err := Collect(msgs)
		if err != nil {
			return Written{}, err
		}
		return s.Write(t, all)
	}
	src, err := compactedSource(msgs)
	if err != nil {
		return Written{}, err
	}
	return sw.WriteStream(t, src)
}

// compacted is a MessageSource as transcript.SinceCompaction cuts it,
// read from base without holding it: head is the last compaction summary
// and the user's messages moved after it (copies: their times may move),
// then base's messages after the first skip of them. Head's positions are
// its own, negative (-1 the first), so they never name one of base's.
type compacted struct {
	base MessageSource
	head []transcript.Message
	skip int
}

// compactedSource finds the last compaction summary in one walk of base,
// holding positions only; base itself when it has none.
func compactedSource(base MessageSource) (MessageSource, error) {
	var run, cut []int64 // the user's messages since the last other; the summary's run and it
	n, skip := 0, -1
	err := base.Each(func(pos int64, m *transcript.Message) error {
		n++
		switch {
		case m.Kind == transcript.KindNotice && m.NoticeType == transcript.NoticeCompactionSummary && strings.TrimSpace(m.Text) != "":
			cut, skip = append(append(cut[:0], run...), pos), n
			run = run[:0]
		case m.Kind == transcript.KindUser:
			run = append(run, pos)
		default:
			run = run[:0]
		}
		return nil
	})
	if err != nil || skip < 0 {
		return base, err
	}
	msgs := make([]transcript.Message, 0, len(cut))
	for _, p := range cut {
		m, err := base.At(p)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return &compacted{base: base, head: transcript.SinceCompaction(msgs), skip: skip}, nil
}

// Len implements MessageSource.
func (c *compacted) Len() int { return len(c.head) + c.base.Len() - c.skip }

// Each implements MessageSource.
func (c *compacted) Each(each func(pos int64, m *transcript.Message) error) error {
	for i := range c.head {
		m := c.head[i]
		if err := each(int64(-1-i), &m); err != nil {
			return err
		}
	}
	n := 0
	return c.base.Each(func(pos int64, m *transcript.Message) error {
		if n++; n <= c.skip {
			return nil
		}
		return each(pos, m)
	})
}

// At implements MessageSource.
func (c *compacted) At(pos int64) (transcript.Message, error) {
	if pos < 0 && -1-pos < int64(len(c.head)) {
		return c.head[-1-pos], nil
	}
	return c.base.At(pos)
}
