package delivery

import (
	"fmt"

	"github.com/cast-dev/cast/internal/transcript"
)

// Kind is the transition a turn makes from the neutral transcript into an
// agent's native session. The zero value is invalid on purpose.
type Kind int

const (
	KindUnspecified Kind = iota
	// Fresh: no native session and no earlier content. A new native
	// session gets the new message only.
	Fresh
	// Reuse: the native session has seen every content row. It is resumed
	// with the new message only.
	Reuse
	// Delta: the native session exists but missed content (another agent
	// ran meanwhile). It is resumed with the missed items as a budgeted,
	// history-framed slice, then the new message.
	Delta
	// Rebuild: no native session, earlier content exists and the agent can
	// reconstitute. A native transcript is written from the neutral copy
	// (trimmed to the window) and resumed with the new message.
	Rebuild
	// Seed: no native session, earlier content exists and the agent
	// cannot reconstitute (Cursor, Muse). A fresh native session is seeded
	// with a budgeted verbatim slice, then the new message.
	Seed
)

var kindNames = [...]string{"unspecified", "fresh", "reuse", "delta", "rebuild", "seed"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("transition(%d)", int(k))
	}
	return kindNames[k]
}

// Resumes reports whether the turn resumes an existing native session
// (Decision.NativeID) rather than starting or writing a new one.
func (k Kind) Resumes() bool { return k == Reuse || k == Delta }

// Range is an inclusive seq range. The zero Range is empty.
type Range struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Empty reports whether r holds no seq.
func (r Range) Empty() bool { return r.From < 1 || r.To < r.From }

// Contains reports whether seq is in r.
func (r Range) Contains(seq int64) bool { return !r.Empty() && seq >= r.From && seq <= r.To }

// String is r as `cast read` takes it: "A:B".
func (r Range) String() string { return fmt.Sprintf("%d:%d", r.From, r.To) }

// Messages returns the messages of msgs whose seq is in r, in order.
func (r Range) Messages(msgs []transcript.Message) []transcript.Message {
	var out []transcript.Message
	for _, m := range msgs {
		if r.Contains(m.Seq) {
			out = append(out, m)
		}
	}
	return out
}

// ContentSeqs is the compact summary Transition needs of the neutral
// messages before the new prompt: the seqs of the rows that count as
// content. Notices (dividers, handoff, merge, migration, compaction
// summaries) and internal rows never do.
func ContentSeqs(msgs []transcript.Message) []int64 {
	var out []int64
	for i := range msgs {
		if msgs[i].IsContent() {
			out = append(out, msgs[i].Seq)
		}
	}
	return out
}

// Input is what Transition decides from.
type Input struct {
	// Native is the native session row for (session, agent); nil or an
	// unrecorded row (no NativeID) means there is none.
	Native *Row
	// Content are the seqs of the content rows before the new prompt (see
	// ContentSeqs), in any order.
	Content []int64
	// CanReconstitute is the agent's Caps.CanReconstitute.
	CanReconstitute bool
	// Missing are seq ranges at or below Native.KnownUpto the native
	// session does not hold: rows stored by others while its turn ran (a
	// message sent meanwhile, which the agent never answered), between rows
	// of its own.
	Missing []Range
	// Node is the node the turn runs on. When both it and Native.Node are
	// set and differ, the native session is out of reach (the session
	// moved) and counts as absent. Empty: not checked.
	Node string
}

// Decision is Transition's answer.
type Decision struct {
	Kind Kind
	// NativeID is the native session to resume (Reuse, Delta).
	NativeID string
	// Missed spans the content the agent has not seen, from the first
	// missed content row to the last (Delta, Seed; Rebuild too, as
	// the range the rebuilt transcript covers). Rows inside it that are not
	// content (notices) are not counted and a slice leaves them out; rows
	// inside it the native session holds (below KnownUpto, outside
	// Input.Missing) are not missed (Input.MissedMessages).
	Missed Range
	// MissedCount is the number of content rows in Missed.
	MissedCount int
}

// Holds reports whether the input's native session (a usable one: see
// Transition) holds the row with this seq.
func (in Input) Holds(seq int64) bool {
	row := in.usable()
	if row == nil || seq > row.KnownUpto {
		return false
	}
	for _, m := range in.Missing {
		if m.Contains(seq) {
			return false
		}
	}
	return true
}

// usable is the native session row, nil when there is none or it is out
// of reach.
func (in Input) usable() *Row {
	row := in.Native
	if row != nil && (!row.Recorded() || (in.Node != "" && row.Node != "" && row.Node != in.Node)) {
		return nil
	}
	return row
}

// MissedMessages are the messages of msgs a delta or a slice made from d
// carries: those in d.Missed the native session does not hold.
func (in Input) MissedMessages(d Decision, msgs []transcript.Message) []transcript.Message {
	var out []transcript.Message
	for _, m := range d.Missed.Messages(msgs) {
		if !in.Holds(m.Seq) {
			out = append(out, m)
		}
	}
	return out
}

// Transition decides how the next turn reaches the agent's native session
// (ARCHITECTURE §4). It is pure: same input, same answer.
//
//	native session | content before the prompt       | can reconstitute | transition
//	none           | none                            | either           | fresh
//	present        | it holds every seq (Holds)      | either           | reuse
//	present        | some seq it does not hold       | either           | delta (those seqs)
//	none           | some                            | yes              | rebuild (all)
//	none           | some                            | no               | seed (all)
func Transition(in Input) Decision {
	row := in.usable()
	var missed Range
	n := 0
	for _, s := range in.Content {
		if s < 1 || in.Holds(s) {
			continue
		}
		n++
		if missed.From == 0 || s < missed.From {
			missed.From = s
		}
		if s > missed.To {
			missed.To = s
		}
	}
	switch {
	case row != nil && n == 0:
		return Decision{Kind: Reuse, NativeID: row.NativeID}
	case row != nil:
		return Decision{Kind: Delta, NativeID: row.NativeID, Missed: missed, MissedCount: n}
	case n == 0:
		return Decision{Kind: Fresh}
	case in.CanReconstitute:
		return Decision{Kind: Rebuild, Missed: missed, MissedCount: n}
	default:
		return Decision{Kind: Seed, Missed: missed, MissedCount: n}
	}
}
