package agents

import (
	"reflect"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/transcript"
)

// recorder is a StreamWriter that keeps what it was given to write, each
// message as Each gave it and as At gives it again by its position.
type recorder struct{ each, at []transcript.Message }

func (r *recorder) Write(_ Target, msgs []transcript.Message) (Written, error) {
	r.each, r.at = msgs, msgs
	return Written{}, nil
}

func (r *recorder) WriteStream(_ Target, src MessageSource) (Written, error) {
	err := src.Each(func(pos int64, m *transcript.Message) error {
		again, err := src.At(pos)
		r.each, r.at = append(r.each, *m), append(r.at, again)
		return err
	})
	return Written{}, err
}

// A streamed write cuts a session at its last compaction summary as a
// write from memory does (transcript.SinceCompaction): the summary, the
// user's messages just before it that it does not hold, then the rest;
// At gives each position's message as Each did.
func TestSinceCompactionStreamsTheSameCut(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	msg := func(kind transcript.Kind, text string, min int) transcript.Message {
		m := transcript.Message{Kind: kind, Text: text, Time: t0.Add(time.Duration(min) * time.Minute)}
		if kind == transcript.KindNotice {
			m.NoticeType = transcript.NoticeCompactionSummary
		}
		return m
	}
	user, answer, summary := transcript.KindUser, transcript.KindAssistant, transcript.KindNotice
	for _, tc := range []struct {
		name string
		msgs []transcript.Message
	}{
		{"no summary", []transcript.Message{msg(user, "q1", 1), msg(answer, "a1", 2)}},
		{"a summary, then the rest", []transcript.Message{msg(user, "q1", 1), msg(answer, "a1", 2), msg(summary, "S", 3), msg(user, "q2", 4)}},
		{"prompts stored before the summary", []transcript.Message{msg(user, "q1", 1), msg(answer, "a1", 2), msg(user, "held q2", 3),
			msg(user, "q3", 6), msg(summary, "S holds q3", 4), msg(answer, "a3", 7)}},
		{"the last of two summaries", []transcript.Message{msg(summary, "S1", 1), msg(user, "q1", 2), msg(summary, "S2", 3), msg(user, "q2", 4)}},
		{"an empty summary is none", []transcript.Message{msg(user, "q1", 1), msg(summary, " ", 2), msg(user, "q2", 3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := transcript.SinceCompaction(append([]transcript.Message(nil), tc.msgs...))
			var r recorder
			if _, err := (sinceCompaction{&r}).WriteStream(Target{}, SliceSource(tc.msgs)); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.each, want) || !reflect.DeepEqual(r.at, want) {
				t.Fatalf("streamed:\n%+v\nAt:\n%+v\nwant:\n%+v", r.each, r.at, want)
			}
			if src, err := compactedSource(SliceSource(tc.msgs)); err != nil || src.Len() != len(want) {
				t.Fatalf("Len %d (%v), want %d", src.Len(), err, len(want))
			}
		})
	}
}
