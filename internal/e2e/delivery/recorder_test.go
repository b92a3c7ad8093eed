package delivery

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cast-dev/cast/internal/deliverycheck"
	"github.com/cast-dev/cast/internal/fakemodel"
)

// maxHold bounds a held answer: a gate the driver never opens (a bug in
// the driver) still ends.
const maxHold = 3 * time.Minute

// recorder is the run's history on one clock: what the driver did and
// what the fake models received, and the holds that pin turns mid-way.
type recorder struct {
	clock atomic.Int64
	start time.Time // the run's, for the step log's elapsed times
	mu    sync.Mutex
	h     deliverycheck.History
	steps []string  // the step log, clock-stamped
	live  io.Writer // gets each step log line as it is logged (nil: none)
	// holds: session -> a hold armed for its next request; held: holds a
	// request took, gate still shut.
	holds   map[string]*hold
	held    []*hold
	noHolds bool          // quiescence: answer everything at once
	arrived chan struct{} // a token per request (dropped when full)
}

type hold struct {
	session string
	gate    chan struct{}
	reached chan struct{} // closed when a request takes the gate
	open    bool
}

func newRecorder() *recorder {
	return &recorder{start: time.Now(), holds: map[string]*hold{}, arrived: make(chan struct{}, 1)}
}

func (r *recorder) tick() int64 { return r.clock.Add(1) }

// logf adds a line to the step log, stamped with the clock and the time
// since the start.
func (r *recorder) logf(format string, args ...any) {
	line := fmt.Sprintf("[%5d %6.1fs] ", r.clock.Load(), time.Since(r.start).Seconds()) + fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.steps = append(r.steps, line)
	if r.live != nil {
		_, _ = io.WriteString(r.live, line+"\n")
	}
	r.mu.Unlock()
}

// policy answers agent's model requests: it records each as it arrives,
// holds it when its session has a hold armed, and answers without quoting
// the prompt (a quoted mark would look like a second delivery): a tool
// result gets a closing answer, TOOLCALL in the new turn a shell call.
func (r *recorder) policy(agent string) func(fakemodel.Request) fakemodel.Reply {
	return func(req fakemodel.Request) fakemodel.Reply {
		items := make([]deliverycheck.Item, 0, len(req.Items))
		for _, it := range req.Items {
			if it.Role == "system" {
				continue // the CLI's own prompt: never a message
			}
			items = append(items, deliverycheck.Item{Role: it.Role, Kind: it.Kind, Text: it.Text + it.ToolInput})
		}
		_, starts := deliverycheck.TurnMarks(items)
		at := r.tick()
		r.mu.Lock()
		r.h.Requests = append(r.h.Requests, deliverycheck.Request{At: at, Agent: agent, Items: items})
		n := len(r.h.Requests)
		reply := fakemodel.Reply{Text: "answer " + deliverycheck.AnswerMark(n)}
		switch {
		case !starts:
			reply.Text = "answer " + deliverycheck.AnswerMark(n) + " after the tool"
		case strings.Contains(newTurnText(items), "TOOLCALL"):
			reply = fakemodel.Reply{Shell: "echo tool-ran"}
		}
		if s := sessionOf(items); s != "" && !r.noHolds {
			if h := r.holds[s]; h != nil {
				delete(r.holds, s)
				r.held = append(r.held, h)
				close(h.reached)
				reply.Gate, reply.Delay = h.gate, maxHold
			}
		}
		r.mu.Unlock()
		select {
		case r.arrived <- struct{}{}:
		default:
		}
		return reply
	}
}

// newTurnText is the text after the last framed history in the last user
// text holding a mark.
func newTurnText(items []deliverycheck.Item) string {
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if it.Role == "user" && it.Kind == "text" && len(deliverycheck.Marks(it.Text)) > 0 {
			text := it.Text
			if j := strings.LastIndex(text, deliverycheck.HistoryEnd); j >= 0 {
				text = text[j:]
			}
			return text
		}
	}
	return ""
}

// sessionOf is the session of a request's newest mark: the session whose
// turn it is.
func sessionOf(items []deliverycheck.Item) string {
	for i := len(items) - 1; i >= 0; i-- {
		if ms := deliverycheck.Marks(items[i].Text); items[i].Role == "user" && len(ms) > 0 {
			return deliverycheck.SessionOf(ms[len(ms)-1])
		}
	}
	return ""
}

// arm holds session's next request; false when one is armed or held
// already, or holds are off.
func (r *recorder) arm(session string) (*hold, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.noHolds || r.holds[session] != nil || r.shut(session) {
		return nil, false
	}
	h := &hold{session: session, gate: make(chan struct{}), reached: make(chan struct{})}
	r.holds[session] = h
	return h, true
}

// armed is session's hold not yet reached, if any.
func (r *recorder) armed(session string) *hold {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holds[session]
}

// heldNow says whether a request of session waits at a shut gate.
func (r *recorder) heldNow(session string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.shut(session)
}

// shut: a request of session waits at a gate (r.mu held).
func (r *recorder) shut(session string) bool {
	return slices.ContainsFunc(r.held, func(h *hold) bool { return h.session == session && !h.open })
}

// release opens the k-th shut gate (k modulo their number); "" when none.
func (r *recorder) release(k uint64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var shut []*hold
	for _, h := range r.held {
		if !h.open {
			shut = append(shut, h)
		}
	}
	if len(shut) == 0 {
		return ""
	}
	h := shut[k%uint64(len(shut))]
	h.open = true
	close(h.gate)
	return h.session
}

// setHolds turns holding on or off; off opens every gate and disarms
// every hold.
func (r *recorder) setHolds(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noHolds = !on
	if on {
		return
	}
	for _, h := range r.held {
		if !h.open {
			h.open = true
			close(h.gate)
		}
	}
	r.holds = map[string]*hold{}
}

// free disarms session's hold and opens its shut gates: its requests are
// answered at once from now until the next hold is armed.
func (r *recorder) free(session string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.holds, session)
	for _, h := range r.held {
		if h.session == session && !h.open {
			h.open = true
			close(h.gate)
		}
	}
}

// history is a copy of the history so far.
func (r *recorder) history() deliverycheck.History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	h.Sessions = slices.Clone(h.Sessions)
	h.Messages = slices.Clone(h.Messages)
	h.Requests = slices.Clone(h.Requests)
	h.Faults = slices.Clone(h.Faults)
	h.Probes = slices.Clone(h.Probes)
	h.Undelivered = slices.Clone(h.Undelivered)
	h.Resumes = slices.Clone(h.Resumes)
	return h
}

// update changes the history under the lock.
func (r *recorder) update(fn func(h *deliverycheck.History)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn(&r.h)
}

// turnOf reports whether a request recorded so far has mark in its new
// turn.
func (r *recorder) turnOf(mark string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, req := range r.h.Requests {
		if turn, ok := deliverycheck.TurnMarks(req.Items); ok && slices.Contains(turn, mark) {
			return true
		}
	}
	return false
}

// stepLog is the step log so far.
func (r *recorder) stepLog() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.steps, "\n")
}
