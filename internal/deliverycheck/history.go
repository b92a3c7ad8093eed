package deliverycheck

import (
	"fmt"
	"regexp"
	"strings"
)

// HistoryEnd ends a framed slice of history (delivery.Slice): what follows
// it in the same text is the new message.
const HistoryEnd = "[cast] End of history."

// markRe matches Mark's output.
var markRe = regexp.MustCompile(`DLV-[a-z0-9]+-[0-9]{4,}-END`)

// Mark is the unique mark of message n of session (session: lowercase
// letters and digits). No mark is a substring of another.
func Mark(session string, n int) string { return fmt.Sprintf("DLV-%s-%04d-END", session, n) }

// answerRe matches AnswerMark's output.
var answerRe = regexp.MustCompile(`ANS-[0-9]{5,}-END`)

// AnswerMark is the unique mark a driver's fake model puts in its answer
// to request n, so a copy of that answer in a later request can be told
// from the answer itself.
func AnswerMark(n int) string { return fmt.Sprintf("ANS-%05d-END", n) }

// SessionOf is the session a mark names ("" for text that is not a mark).
func SessionOf(mark string) string {
	if !markRe.MatchString(mark) {
		return ""
	}
	s := strings.TrimPrefix(mark, "DLV-")
	return s[:strings.Index(s, "-")]
}

// Marks returns the marks in text, left to right.
func Marks(text string) []string { return markRe.FindAllString(text, -1) }

// Item is one element of a request as the model received it (the fake
// model's normalized items).
type Item struct {
	Role string // system | user | assistant | tool
	Kind string // text | thinking | tool_call | tool_result
	Text string // text, thinking, tool output, or a call's input
}

// Request is one model request.
type Request struct {
	At      int64  // when it reached the model, on the History's clock
	Agent   string // the agent whose model endpoint received it
	Items   []Item
	Refused bool // the model refused it (an HTTP 4xx answer)
}

// Session is a session and where its lineage starts.
type Session struct {
	ID     string
	Parent string // "" for a session that is not a fork
	// ForkedAt is the parent's last seq copied into the fork: the parent's
	// own messages up to it (and everything the parent inherited) are the
	// fork's history.
	ForkedAt int64
}

// Message is an acknowledged user message.
type Message struct {
	Session string
	Seq     int64 // the seq the store acknowledged
	Mark    string
	// At is when the store acknowledged it, on the History's clock (0:
	// not known, read as before everything). Only the properties that
	// ask what was sent before a fault (carried, resumed) read it.
	At int64
}

// Fault is a span of the clock in which a kill -9 or a migration could cut
// a running turn.
type Fault struct {
	Start, End int64
	What       string
	// Session, when set, is the one session whose turn the fault could
	// cut: a signal from outside to that session's agent CLI. It excuses
	// that session's re-runs only, and the session's next turn must carry
	// what the killed one held (carried).
	Session string
}

// Resume is what the driver saw after a fault that must need no new
// message to finish what it cut (a service manager's stop of a node with
// its CLIs, then its start): nothing was sent to Session from From on,
// and at At the store said the session's agent had its messages up to
// seq Delivered.
type Resume struct {
	Session   string
	From, At  int64
	Delivered int64
}

// Probe is a message sent at quiescence to see what the session's agent
// receives; it is a Message too.
type Probe struct {
	At      int64 // when it was sent: only a later request can carry it
	Session string
	Mark    string
	Agent   string // the session's agent when the probe was sent
}

// Undelivered is an undelivered notice: seqs From..To of Session never
// reached the agent (its turn was refused).
type Undelivered struct {
	Session  string
	From, To int64
}

// History is everything the checker reads.
type History struct {
	Sessions    []Session
	Messages    []Message
	Requests    []Request
	Faults      []Fault
	Probes      []Probe
	Undelivered []Undelivered
	Resumes     []Resume
}

// Violation is one broken property.
type Violation struct {
	Rule    string // duplicate, foreign, order, mixed, rerun, inherited, unanswered, agent, missing, undelivered, carried, resumed
	Session string
	Mark    string
	Request int // index in History.Requests, -1 for none
	Detail  string
	Others  []int // other requests the detail names
}

func (v Violation) String() string {
	req := ""
	if v.Request >= 0 {
		req = fmt.Sprintf(" request #%d", v.Request)
	}
	return fmt.Sprintf("%s: session %s%s %s: %s", v.Rule, v.Session, req, v.Mark, v.Detail)
}
