package deliverycheck

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Check returns every violation of the delivery rule in h (none: the rule
// held), in the order the properties are listed in the package comment.
func Check(h History) []Violation {
	ix := newIndex(h)
	views := make([]view, len(h.Requests))
	var out []Violation
	for i, r := range h.Requests {
		views[i] = ix.view(r)
		out = append(out, ix.perRequest(i, views[i])...)
	}
	out = append(out, ix.reruns(views)...)
	out = append(out, ix.probes(views)...)
	out = append(out, ix.refusals(views)...)
	out = append(out, ix.carried(views)...)
	return append(out, ix.resumed()...)
}

// index is h with its lookups built once.
type index struct {
	h        History
	sessions map[string]Session
	byMark   map[string]Message
	own      map[string][]Message      // session -> its own messages, by seq
	lineage  map[string][]string       // session -> its lineage's marks, in order
	pos      map[string]map[string]int // session -> mark -> position in lineage
	excluded map[string]bool           // marks an undelivered notice names
}

func newIndex(h History) *index {
	ix := &index{h: h, sessions: map[string]Session{}, byMark: map[string]Message{},
		lineage: map[string][]string{}, pos: map[string]map[string]int{}, excluded: map[string]bool{}}
	for _, s := range h.Sessions {
		ix.sessions[s.ID] = s
	}
	own := map[string][]Message{}
	for _, m := range h.Messages {
		ix.byMark[m.Mark] = m
		own[m.Session] = append(own[m.Session], m)
	}
	for _, ms := range own {
		sort.Slice(ms, func(i, j int) bool { return ms[i].Seq < ms[j].Seq })
	}
	ix.own = own
	for _, s := range h.Sessions {
		ix.lineage[s.ID] = ix.buildLineage(s.ID, own, map[string]bool{})
		ix.pos[s.ID] = map[string]int{}
		for i, m := range ix.lineage[s.ID] {
			ix.pos[s.ID][m] = i
		}
	}
	for _, u := range h.Undelivered {
		for _, m := range own[u.Session] {
			if m.Seq >= u.From && m.Seq <= u.To {
				ix.excluded[m.Mark] = true
			}
		}
	}
	return ix
}

// buildLineage is the parent's lineage up to the fork point, then the
// session's own messages by seq.
func (ix *index) buildLineage(id string, own map[string][]Message, visiting map[string]bool) []string {
	if visiting[id] {
		return nil // a cycle in hand-written lineage: stop
	}
	visiting[id] = true
	s := ix.sessions[id]
	var out []string
	if s.Parent != "" {
		for _, mark := range ix.buildLineage(s.Parent, own, visiting) {
			if m := ix.byMark[mark]; m.Session != s.Parent || m.Seq <= s.ForkedAt {
				out = append(out, mark)
			}
		}
	}
	for _, m := range own[id] {
		out = append(out, m.Mark)
	}
	return out
}

// chain is id and its ancestors, nearest first.
func (ix *index) chain(id string) []string {
	var out []string
	for id != "" && !slices.Contains(out, id) {
		out = append(out, id)
		id = ix.sessions[id].Parent
	}
	return out
}

// view is what the checker reads from one request.
type view struct {
	marks   []string // known marks, in order
	session string   // whose request it is ("" when it holds no known mark)
	mixed   string   // a session not on session's chain, when marks mix
	isTurn  bool     // it starts a turn
	turn    []string // the new turn's marks
	echoes  []string // answer marks it holds more than once, each once
}

func (ix *index) view(r Request) view {
	var v view
	answers := map[string]int{}
	for _, it := range r.Items {
		for _, m := range Marks(it.Text) {
			if ix.known(m) {
				v.marks = append(v.marks, m)
			}
		}
		for _, a := range answerRe.FindAllString(it.Text, -1) {
			if answers[a]++; answers[a] == 2 {
				v.echoes = append(v.echoes, a)
			}
		}
	}
	v.session, v.mixed = ix.owner(v.marks)
	v.turn, v.isTurn = turnOf(r.Items, ix.known)
	return v
}

func (ix *index) known(mark string) bool {
	_, ok := ix.byMark[mark]
	return ok
}

// TurnMarks returns the marks of the new turn in items and whether the
// request starts a turn at all (see "New turn and history").
func TurnMarks(items []Item) (marks []string, starts bool) {
	return turnOf(items, func(string) bool { return true })
}

// turnOf is TurnMarks counting only the marks known accepts.
func turnOf(items []Item, known func(string) bool) (turn []string, starts bool) {
	last := -1 // the last user text item holding a mark
	for i, it := range items {
		if it.Role == "user" && it.Kind == "text" && slices.ContainsFunc(Marks(it.Text), known) {
			last = i
		}
	}
	if last < 0 || slices.ContainsFunc(items[last+1:], func(it Item) bool {
		return it.Role == "assistant" || it.Role == "tool" || it.Kind == "tool_call" || it.Kind == "tool_result"
	}) {
		return nil, false
	}
	text := items[last].Text
	if i := strings.LastIndex(text, HistoryEnd); i >= 0 {
		text = text[i+len(HistoryEnd):]
	}
	for _, m := range Marks(text) {
		if known(m) {
			turn = append(turn, m)
		}
	}
	return turn, true
}

// owner is the deepest session among marks' sessions, and a session off
// its ancestor chain if there is one.
func (ix *index) owner(marks []string) (owner, mixed string) {
	for _, m := range marks {
		s := ix.byMark[m].Session
		if owner == "" || len(ix.chain(s)) > len(ix.chain(owner)) {
			owner = s
		}
	}
	chain := ix.chain(owner)
	for _, m := range marks {
		if s := ix.byMark[m].Session; !slices.Contains(chain, s) {
			return owner, s
		}
	}
	return owner, ""
}

// perRequest checks property 1 for request i.
func (ix *index) perRequest(i int, v view) []Violation {
	var out []Violation
	if v.mixed != "" {
		out = append(out, Violation{Rule: "mixed", Session: v.session, Request: i,
			Detail: fmt.Sprintf("holds messages of session %s, which is neither %s nor one of its ancestors", v.mixed, v.session)})
	}
	for _, a := range v.echoes {
		out = append(out, Violation{Rule: "echo", Session: v.session, Mark: a, Request: i,
			Detail: "the model's own answer appears more than once in one request"})
	}
	seen := map[string]bool{}
	lastPos, lastMark, ordered := -1, "", true
	for _, m := range v.marks {
		if seen[m] {
			out = append(out, Violation{Rule: "duplicate", Session: v.session, Mark: m, Request: i,
				Detail: "appears more than once in one request"})
			continue
		}
		seen[m] = true
		p, ok := ix.pos[v.session][m]
		if !ok {
			if ix.byMark[m].Session != v.mixed {
				out = append(out, Violation{Rule: "foreign", Session: v.session, Mark: m, Request: i,
					Detail: fmt.Sprintf("session %s's message (seq %d) is not in this session's lineage (after the fork point)", ix.byMark[m].Session, ix.byMark[m].Seq)})
			}
			continue
		}
		if p < lastPos && ordered {
			ordered = false
			out = append(out, Violation{Rule: "order", Session: v.session, Mark: m, Request: i,
				Detail: fmt.Sprintf("comes after %s, which was sent later", lastMark)})
		}
		if p > lastPos {
			lastPos, lastMark = p, m
		}
	}
	return out
}

// reruns checks property 2.
func (ix *index) reruns(views []view) []Violation {
	var out []Violation
	type key struct{ session, mark string }
	turns := map[key][]int{}
	var keys []key
	for i, v := range views {
		if !v.isTurn {
			continue
		}
		for _, m := range v.turn {
			if from := ix.byMark[m].Session; from != v.session && slices.Contains(ix.chain(v.session), from) {
				out = append(out, Violation{Rule: "inherited", Session: v.session, Mark: m, Request: i,
					Detail: fmt.Sprintf("session %s's message, history of this fork, ran as its new turn", from)})
				continue
			}
			k := key{v.session, m}
			if turns[k] == nil {
				keys = append(keys, k)
			}
			turns[k] = append(turns[k], i)
		}
	}
	for _, k := range keys {
		reqs := turns[k]
		sort.SliceStable(reqs, func(a, b int) bool { return ix.h.Requests[reqs[a]].At < ix.h.Requests[reqs[b]].At })
		for j := 1; j < len(reqs); j++ {
			first, again := ix.h.Requests[reqs[j-1]], ix.h.Requests[reqs[j]]
			if !ix.faultBetween(k.session, first.At, again.At) {
				out = append(out, Violation{Rule: "rerun", Session: k.session, Mark: k.mark, Request: reqs[j], Others: []int{reqs[j-1]},
					Detail: fmt.Sprintf("new turn again (first as request #%d at %d, again at %d) with no fault between", reqs[j-1], first.At, again.At)})
			}
		}
	}
	return out
}

// faultBetween: a fault that could cut session's turn ended after from
// and started before to.
func (ix *index) faultBetween(session string, from, to int64) bool {
	return slices.ContainsFunc(ix.h.Faults, func(f Fault) bool {
		return f.End > from && f.Start < to && (f.Session == "" || f.Session == session)
	})
}

// probes checks property 3.
func (ix *index) probes(views []view) []Violation {
	var out []Violation
	for _, p := range ix.h.Probes {
		req := -1
		for i, v := range views {
			if v.isTurn && v.session == p.Session && slices.Contains(v.turn, p.Mark) && ix.h.Requests[i].At > p.At &&
				(req < 0 || ix.h.Requests[i].At < ix.h.Requests[req].At) {
				req = i
			}
		}
		if req < 0 {
			out = append(out, Violation{Rule: "unanswered", Session: p.Session, Mark: p.Mark, Request: -1,
				Detail: fmt.Sprintf("the probe sent at %d never reached %s as a new turn", p.At, p.Agent)})
			continue
		}
		if got := ix.h.Requests[req].Agent; got != p.Agent {
			out = append(out, Violation{Rule: "agent", Session: p.Session, Mark: p.Mark, Request: req,
				Detail: fmt.Sprintf("the probe reached %s; the session's agent is %s", got, p.Agent)})
		}
		seq := ix.byMark[p.Mark].Seq
		for _, m := range ix.lineage[p.Session] {
			msg := ix.byMark[m]
			if ix.excluded[m] || (msg.Session == p.Session && msg.Seq >= seq) || slices.Contains(views[req].marks, m) {
				continue
			}
			out = append(out, Violation{Rule: "missing", Session: p.Session, Mark: m, Request: req,
				Detail: fmt.Sprintf("acknowledged (session %s seq %d) before the probe %s, absent from the probe's request", msg.Session, msg.Seq, p.Mark)})
		}
	}
	return out
}

// refusals checks property 4.
func (ix *index) refusals(views []view) []Violation {
	var out []Violation
	for _, u := range ix.h.Undelivered {
		ok := false
		for i, v := range views {
			if !ix.h.Requests[i].Refused || !v.isTurn || v.session != u.Session {
				continue
			}
			ok = ok || slices.ContainsFunc(v.turn, func(m string) bool {
				msg := ix.byMark[m]
				return msg.Session == u.Session && msg.Seq >= u.From && msg.Seq <= u.To
			})
		}
		if !ok {
			out = append(out, Violation{Rule: "undelivered", Session: u.Session, Request: -1,
				Detail: fmt.Sprintf("an undelivered notice drops seqs %d-%d, but no model refused a turn carrying them", u.From, u.To)})
		}
	}
	return out
}

// carried checks property 5: after a kill of a session's CLI, the
// session's first request that starts a turn holds every message of its
// lineage acknowledged before the kill, the killed turn's among them.
func (ix *index) carried(views []view) []Violation {
	var out []Violation
	for _, f := range ix.h.Faults {
		if f.Session == "" {
			continue
		}
		next := -1
		for i, v := range views {
			if at := ix.h.Requests[i].At; v.isTurn && v.session == f.Session && at > f.End && (next < 0 || at < ix.h.Requests[next].At) {
				next = i
			}
		}
		if next < 0 {
			continue // no turn since: the probes check it is not lost
		}
		for _, m := range ix.lineage[f.Session] {
			if msg := ix.byMark[m]; msg.At < f.Start && !ix.excluded[m] && !slices.Contains(views[next].marks, m) {
				out = append(out, Violation{Rule: "carried", Session: f.Session, Mark: m, Request: next,
					Detail: fmt.Sprintf("acknowledged (session %s seq %d) before %s at %d, absent from the session's next turn", msg.Session, msg.Seq, f.What, f.Start)})
			}
		}
	}
	return out
}

// resumed checks property 6: after a fault that must need no new
// message, the session's agent got every message sent before it.
func (ix *index) resumed() []Violation {
	var out []Violation
	for _, r := range ix.h.Resumes {
		for _, m := range ix.own[r.Session] {
			if m.At < r.From && m.Seq > r.Delivered && !ix.excluded[m.Mark] {
				out = append(out, Violation{Rule: "resumed", Session: r.Session, Mark: m.Mark, Request: -1,
					Detail: fmt.Sprintf("acknowledged (seq %d) before the fault at %d, not delivered by %d with nothing sent since (the store's delivered seq: %d)", m.Seq, r.From, r.At, r.Delivered)})
			}
		}
	}
	return out
}
