package deliverycheck

import (
	"slices"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/delivery"
	"github.com/cast-dev/cast/internal/transcript"
)

func user(marks ...string) Item {
	return Item{Role: "user", Kind: "text", Text: "please " + strings.Join(marks, "\n\n")}
}

var (
	answer = Item{Role: "assistant", Kind: "text", Text: "ok"}
	call   = Item{Role: "assistant", Kind: "tool_call", Text: `{"command":"true"}`}
	result = Item{Role: "tool", Kind: "tool_result", Text: "done"}
	// A framed slice of history before the new message, as a delta puts it.
	framed = func(history, prompt string) Item {
		return Item{Role: "user", Kind: "text", Text: "[cast] What happened (seq 1-2). It is history, NOT new instructions.\n\n[#1 user]\n" +
			history + "\n\n" + HistoryEnd + " It is not a request; the new message follows.\n\n" + prompt}
	}
)

// Marks of the base history: s1 is a root session, s2 a fork of s1 at seq
// 3 (it holds s1's first two messages), s3 another fork of s1.
var (
	a1, a2, a3 = Mark("s1", 1), Mark("s1", 2), Mark("s1", 3)
	b1, c1     = Mark("s2", 1), Mark("s3", 1)
)

func base() History {
	return History{
		Sessions: []Session{{ID: "s1"}, {ID: "s2", Parent: "s1", ForkedAt: 3}, {ID: "s3", Parent: "s1", ForkedAt: 3}},
		Messages: []Message{{"s1", 1, a1, 0}, {"s1", 3, a2, 0}, {"s1", 5, a3, 0}, {"s2", 5, b1, 0}, {"s3", 5, c1, 0}},
	}
}

func req(at int64, agent string, items ...Item) Request {
	return Request{At: at, Agent: agent, Items: items}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		edit func(*History)
		want []string // rule:mark, sorted
	}{
		{"each message once, in order, as a new turn once", func(h *History) {
			h.Requests = []Request{
				req(1, "claude", user(a1)),
				req(2, "claude", user(a1), answer, user(a2)),
				// The same turn going on after a tool call: not a new turn.
				req(3, "claude", user(a1), answer, user(a2), call, result),
				req(4, "codex", framed(a1+" "+a2, a3)),
			}
		}, nil},
		{"pending messages joined into one prompt", func(h *History) {
			h.Requests = []Request{req(1, "claude", user(a1, a2, a3))}
		}, nil},
		{"duplicated within one request", func(h *History) {
			h.Requests = []Request{req(1, "claude", user(a1), answer, user(a1, a2))}
		}, []string{"duplicate:" + a1}},
		{"duplicated as history and again in the framed slice", func(h *History) {
			h.Requests = []Request{req(1, "claude", user(a1)), req(2, "claude", user(a1), answer, framed(a1, a2))}
		}, []string{"duplicate:" + a1}},
		{"out of order", func(h *History) {
			h.Requests = []Request{req(1, "claude", user(a2), answer, user(a1))}
		}, []string{"order:" + a1}},
		{"a fork carries its parent's message after the fork point", func(h *History) {
			h.Requests = []Request{req(1, "pi", user(a1), user(a2), user(a3), answer, user(b1))}
		}, []string{"foreign:" + a3}},
		{"a fork's request holds its parent's history, then its own", func(h *History) {
			h.Requests = []Request{req(1, "pi", user(a1), answer, user(a2), answer, user(b1))}
		}, nil},
		{"messages of two sibling forks in one request", func(h *History) {
			h.Requests = []Request{req(1, "pi", user(a1), answer, user(b1), answer, user(c1))}
		}, []string{"mixed:"}},
		{"re-run as a new turn without a fault", func(h *History) {
			h.Requests = []Request{req(1, "claude", user(a1)), req(5, "claude", user(a1))}
		}, []string{"rerun:" + a1}},
		{"re-run after a kill -9 that cut the turn", func(h *History) {
			h.Requests = []Request{req(1, "claude", user(a1)), req(5, "claude", user(a1))}
			h.Faults = []Fault{{Start: 2, End: 4, What: "node kill -9"}}
		}, nil},
		{"a fault over before the first request excuses nothing", func(h *History) {
			h.Requests = []Request{req(3, "claude", user(a1)), req(5, "claude", user(a1))}
			h.Faults = []Fault{{Start: 1, End: 2, What: "control plane kill -9"}}
		}, []string{"rerun:" + a1}},
		{"a fork runs its inherited history as a new turn", func(h *History) {
			h.Requests = []Request{req(1, "claude", user(a1)), req(2, "pi", user(a1, b1))}
		}, []string{"inherited:" + a1}},
		{"probe answered with the whole lineage, an interrupted message as history", func(h *History) {
			h.Messages = append(h.Messages, Message{"s2", 9, Mark("s2", 2), 0})
			h.Requests = []Request{
				req(1, "pi", user(a1), answer, user(a2), answer, user(b1)), // interrupted: no answer
				req(3, "pi", user(a1), answer, user(a2), answer, user(b1), user(Mark("s2", 2))),
			}
			h.Probes = []Probe{{At: 2, Session: "s2", Mark: Mark("s2", 2), Agent: "pi"}}
		}, nil},
		{"probe's request lacks an interrupted message", func(h *History) {
			h.Messages = append(h.Messages, Message{"s1", 7, Mark("s1", 4), 0})
			h.Requests = []Request{
				req(1, "claude", user(a1)), req(2, "claude", user(a1), answer, user(a2, a3)),
				req(4, "claude", user(a1), answer, user(a2), answer, user(Mark("s1", 4))),
			}
			h.Probes = []Probe{{At: 3, Session: "s1", Mark: Mark("s1", 4), Agent: "claude"}}
		}, []string{"missing:" + a3}},
		{"probe never reaches the model", func(h *History) {
			// (A request before the probe was sent cannot be its turn.)
			h.Requests = []Request{req(1, "claude", user(a1, a2, a3))}
			h.Probes = []Probe{{At: 2, Session: "s1", Mark: a3, Agent: "claude"}}
		}, []string{"unanswered:" + a3}},
		{"probe reaches the agent switched away from", func(h *History) {
			h.Requests = []Request{req(1, "claude", user(a1, a2)), req(3, "claude", user(a1, a2), answer, user(a3))}
			h.Probes = []Probe{{At: 2, Session: "s1", Mark: a3, Agent: "codex"}}
		}, []string{"agent:" + a3}},
		{"a refused message is left out", func(h *History) {
			refused := req(2, "claude", user(a1), answer, user(a2))
			refused.Refused = true
			h.Requests = []Request{req(1, "claude", user(a1)), refused, req(4, "claude", user(a1), answer, user(a3))}
			h.Undelivered = []Undelivered{{Session: "s1", From: 2, To: 3}}
			h.Probes = []Probe{{At: 3, Session: "s1", Mark: a3, Agent: "claude"}}
		}, nil},
		{"an undelivered notice no refusal explains", func(h *History) {
			h.Requests = []Request{req(1, "claude", user(a1)), req(2, "claude", user(a1), answer, user(a2)), req(4, "claude", user(a1), answer, user(a3))}
			h.Undelivered = []Undelivered{{Session: "s1", From: 2, To: 3}}
			h.Probes = []Probe{{At: 3, Session: "s1", Mark: a3, Agent: "claude"}}
		}, []string{"undelivered:"}},
		{"each of the model's answers once, across a switch", func(h *History) {
			ans1 := Item{Role: "assistant", Kind: "text", Text: "answer " + AnswerMark(1)}
			h.Requests = []Request{req(1, "claude", user(a1)), req(2, "codex", framed(a1+" "+ans1.Text, a2))}
		}, nil},
		{"the model's answer echoed back as history it already holds", func(h *History) {
			ans1 := Item{Role: "assistant", Kind: "text", Text: "answer " + AnswerMark(1)}
			h.Requests = []Request{req(1, "claude", user(a1)), req(2, "claude", user(a1), ans1, framed(ans1.Text, a2))}
		}, []string{"echo:" + AnswerMark(1)}},
		{"a kill of a session's CLI excuses its re-run", func(h *History) {
			h.Messages[1].At, h.Messages[2].At = 10, 10 // a2, a3: sent after it
			h.Requests = []Request{req(1, "claude", user(a1)), req(5, "claude", user(a1))}
			h.Faults = []Fault{{Start: 2, End: 4, What: "kill of s1's CLI", Session: "s1"}}
		}, nil},
		{"a kill of one session's CLI excuses no other session's re-run", func(h *History) {
			fork := []Item{user(a1), answer, user(a2), answer, user(b1)}
			h.Requests = []Request{req(1, "pi", fork...), req(5, "pi", fork...)}
			h.Faults = []Fault{{Start: 2, End: 4, What: "kill of s1's CLI", Session: "s1"}}
		}, []string{"rerun:" + b1}},
		{"the killed turn's message runs with the next one", func(h *History) {
			h.Requests = []Request{req(1, "claude", user(a1)), req(2, "claude", user(a1), answer, user(a2)),
				// A tool call's continuation starts no turn.
				req(5, "claude", user(a1), answer, user(a2), call, result),
				req(6, "claude", user(a1), answer, user(a2, a3))}
			h.Faults = []Fault{{Start: 3, End: 4, What: "kill of s1's CLI", Session: "s1"}}
		}, nil},
		{"the next turn after a CLI kill lacks the killed turn's message", func(h *History) {
			h.Requests = []Request{req(1, "claude", user(a1)), req(2, "claude", user(a1), answer, user(a2)),
				req(6, "claude", user(a1), answer, user(a3))}
			h.Faults = []Fault{{Start: 3, End: 4, What: "kill of s1's CLI", Session: "s1"}}
		}, []string{"carried:" + a2}},
		{"a message sent after a CLI kill is not the killed turn's", func(h *History) {
			h.Messages[2].At = 10 // a3
			h.Requests = []Request{req(1, "claude", user(a1)), req(2, "claude", user(a1), answer, user(a2)),
				req(6, "claude", user(a1), answer, user(a2))}
			h.Faults = []Fault{{Start: 3, End: 4, What: "kill of s1's CLI", Session: "s1"}}
		}, nil},
		{"a stopped node ran the cut message with nothing sent", func(h *History) {
			h.Resumes = []Resume{{Session: "s1", From: 5, At: 9, Delivered: 5}}
		}, nil},
		{"a stopped node left the cut message for the next one", func(h *History) {
			h.Resumes = []Resume{{Session: "s1", From: 5, At: 9, Delivered: 3}}
		}, []string{"resumed:" + a3}},
		{"a message sent after the stop is not asked for", func(h *History) {
			h.Messages[2].At = 6 // a3
			h.Resumes = []Resume{{Session: "s1", From: 5, At: 9, Delivered: 3}}
		}, nil},
		{"a refused message is not asked for after a stop", func(h *History) {
			refused := req(2, "claude", user(a1), answer, user(a3))
			refused.Refused = true
			h.Requests = []Request{req(1, "claude", user(a1, a2)), refused}
			h.Undelivered = []Undelivered{{Session: "s1", From: 5, To: 5}}
			h.Resumes = []Resume{{Session: "s1", From: 5, At: 9, Delivered: 3}}
		}, nil},
		{"marks nobody acknowledged are ignored", func(h *History) {
			h.Requests = []Request{req(1, "claude", user(a1, Mark("s9", 1), Mark("s9", 1)))}
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			tc.edit(&h)
			vs := Check(h)
			var got []string
			for _, v := range vs {
				got = append(got, v.Rule+":"+v.Mark)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v\n%s", got, tc.want, Explain(h, vs))
			}
		})
	}
}

// The checker splits a prompt where delivery.Slice ends its framed history:
// HistoryEnd must be what Slice writes.
func TestHistoryEndIsSlices(t *testing.T) {
	s := delivery.Slice([]transcript.Message{{Seq: 1, Kind: transcript.KindUser, Text: a1}}, delivery.SliceOptions{SessionID: "x", ContextWindow: 100000})
	if i := strings.LastIndex(s.Text, HistoryEnd); i < 0 || strings.Contains(s.Text[i:], a1) {
		t.Fatalf("slice text does not end its history with %q:\n%s", HistoryEnd, s.Text)
	}
}

func TestMarks(t *testing.T) {
	text := Mark("s1", 1) + " and " + Mark("s12", 10) + Mark("s1", 12345)
	if got := Marks(text); !slices.Equal(got, []string{"DLV-s1-0001-END", "DLV-s12-0010-END", "DLV-s1-12345-END"}) {
		t.Fatalf("marks %v", got)
	}
	if s := SessionOf(Mark("s12", 3)); s != "s12" || SessionOf("DLV-x") != "" {
		t.Fatalf("SessionOf: %q", s)
	}
}

func TestExplainNamesTheRequest(t *testing.T) {
	h := base()
	h.Requests = []Request{req(7, "gemini", user(a2), answer, user(a1))}
	out := Explain(h, Check(h))
	for _, want := range []string{"order: session s1 request #0", "request #0 at 7 to gemini", a1 + "*"} {
		if !strings.Contains(out, want) {
			t.Fatalf("explanation lacks %q:\n%s", want, out)
		}
	}
}

// A re-run names both requests, and the explanation shows both.
func TestExplainShowsBothRuns(t *testing.T) {
	h := base()
	h.Requests = []Request{req(1, "claude", user(a1)), req(5, "claude", user(a1))}
	out := Explain(h, Check(h))
	for _, want := range []string{"request #0 at 1 to claude", "request #1 at 5 to claude"} {
		if !strings.Contains(out, want) {
			t.Fatalf("explanation lacks %q:\n%s", want, out)
		}
	}
}
