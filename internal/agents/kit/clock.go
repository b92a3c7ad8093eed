package kit

import (
	"time"

	"github.com/cast-dev/cast/internal/transcript"
)

// Clock is now, or time.Now when now is nil (writers' Now fields).
func Clock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}

// ISOTime is t as JavaScript's Date.toISOString writes it (UTC, to the
// millisecond): how the node CLIs (Claude Code, Codex's rollouts, Gemini
// CLI, pi) stamp their records, and so how their writers must.
func ISOTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// MessageTimes gives each message a writer places, in order, a time: its
// own, else the one before it's (a message that carries none stays where
// it stands in the order), else Now.
type MessageTimes struct {
	Now  time.Time
	last time.Time
}

// Of is m's time; call it for the messages in their order.
func (mt *MessageTimes) Of(m *transcript.Message) time.Time {
	t := m.Time
	if t.IsZero() {
		t = mt.last
	}
	if t.IsZero() {
		t = mt.Now
	}
	mt.last = t
	return t
}
