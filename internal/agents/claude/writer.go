package claude

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/transcript"
)

// DefaultModel is written on assistant lines that record no model. It must
// be a real Claude model id: the CLI resumes with the last assistant line's
// model when it is a Claude model.
const DefaultModel = "claude-sonnet-4-5"

// missingResult is the output given to a tool call whose result never made it
// into the transcript: without a paired tool_result Claude silently drops the
// whole assistant turn.
const missingResult = "[cast: no result was recorded for this tool call; the session ended or moved on before it finished]"

// Writer renders neutral messages as a Claude Code transcript.
type Writer struct {
	TrimAbove int // estimated tokens; 0 means DefaultTrimAbove
	KeepTail  int // estimated tokens; 0 means DefaultKeepTail
}

var _ agents.Writer = Writer{}
var _ agents.Reader = Reader{}

// namespace derives stable native ids from cast session ids, so writing the
// same session twice gives the same file.
var namespace = uuid.MustParse("6f1c1ad4-59c5-4c0e-9a51-6b1a3f0c2d77")

// NativeID is the Claude session id the writer uses for a cast session.
func NativeID(sessionID string) string {
	return uuid.NewSHA1(namespace, []byte("claude:"+sessionID)).String()
}

// Write writes msgs to <t.Home>/projects/<slug(t.Cwd)>/<native id>.jsonl,
// replacing any earlier file for the same id (the neutral copy is the
// source of truth).
func (w Writer) Write(t agents.Target, msgs []transcript.Message) (agents.Written, error) {
	if err := t.Check("claude"); err != nil {
		return agents.Written{}, err
	}
	id := t.NativeID
	if id == "" {
		if t.SessionID == "" {
			return agents.Written{}, errors.New("claude: target needs a SessionID or NativeID")
		}
		id = NativeID(t.SessionID)
	}
	var in []indexed
	for i, m := range msgs {
		if !m.Rendered() {
			continue // internal rows never leave the server
		}
		seq := m.Seq
		if seq == 0 {
			seq = int64(i + 1)
		}
		in = append(in, indexed{m, seq})
	}
	above, tail := w.TrimAbove, w.KeepTail
	if above <= 0 {
		above = DefaultTrimAbove
	}
	if tail <= 0 {
		tail = DefaultKeepTail
	}
	kept, omitted := trim(in, above, tail, t.SessionID)
	turns := render(kept)
	dir := ProjectDir(t.Home, t.Cwd)
	path := filepath.Join(dir, id+".jsonl")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return agents.Written{}, err
	}
	// Streamed into a temporary sibling and renamed over path, so the CLI
	// never sees a half-written transcript.
	if err := fsutil.WriteAtomic(path, 0o600, func(w io.Writer) error { return lines(w, t, id, turns) }); err != nil {
		return agents.Written{}, err
	}
	return agents.Written{NativeID: id, Path: path, Omitted: omitted}, nil
}

// turn is one API message before it becomes a line.
type turn struct {
	role    string
	meta    bool
	text    string     // user text sent as a plain string (when blocks is nil)
	blocks  []outBlock // content blocks otherwise
	model   string
	hasCall bool
	at      time.Time
}

// render groups messages into API turns with every tool_use answered in the
// very next user message.
func render(msgs []indexed) []turn {
	g := &grouping{msgs: msgs, resultsFor: map[string][]int{}, consumed: map[int]bool{}, usedIDs: map[string]bool{}}
	// Where each call's result sits, so it can be pulled up right behind
	// its call whatever came in between.
	for i, m := range msgs {
		if m.Kind == transcript.KindToolResult {
			g.resultsFor[m.ToolResult.CallID] = append(g.resultsFor[m.ToolResult.CallID], i)
		}
	}
	for i, m := range msgs {
		g.add(i, m)
	}
	g.flush()
	return g.turns
}

// grouping is render's state: the turns made so far, and the assistant
// turn being gathered, whose calls' results go in the turn after it.
type grouping struct {
	msgs       []indexed
	resultsFor map[string][]int // call id → the places of its results
	consumed   map[int]bool     // results already placed behind their call
	usedIDs    map[string]bool
	turns      []turn

	// The assistant turn being gathered.
	blocks []outBlock
	calls  []pendingCall
	model  string
	at     time.Time
}

// pendingCall is a tool_use of the gathered turn: its id in the source
// and as written, and its place in msgs.
type pendingCall struct {
	orig, id string
	at       int
}

// add places msgs[i], m.
func (g *grouping) add(i int, m indexed) {
	switch m.Kind {
	case transcript.KindAssistant:
		g.text(m)
	case transcript.KindThinking:
		// Dropped: Claude replays thinking blocks to the API, which
		// rejects them without the signature only Anthropic can make,
		// and the neutral copy keeps none.
	case transcript.KindToolCall:
		g.call(i, m)
	case transcript.KindToolResult:
		g.flush()
		if !g.consumed[i] {
			g.orphanResult(m)
		}
	case transcript.KindUser:
		g.flush()
		g.user(m)
	case transcript.KindNotice:
		g.flush()
		g.turns = append(g.turns, turn{role: "user", meta: true, text: noticeTag.Wrap(m.NoticeType, m.Text), at: m.Time})
	}
}

// text adds an assistant text block to the gathered turn.
func (g *grouping) text(m indexed) {
	if strings.TrimSpace(m.Text) == "" {
		return // the API rejects empty text blocks
	}
	if len(g.calls) > 0 {
		// Text after a call was said after it ran: close the turn
		// so the results come first, as they did.
		g.flush()
	}
	if len(g.blocks) == 0 {
		g.at = m.Time
	}
	g.blocks = append(g.blocks, outBlock{Type: "text", Text: m.Text})
	if g.model == "" {
		g.model = m.Model
	}
}

// call adds msgs[i], a tool call, to the gathered turn as a tool_use.
func (g *grouping) call(i int, m indexed) {
	if len(g.blocks) == 0 {
		g.at = m.Time
	}
	cid := g.uniqueID(m.ToolCall.ID, i)
	name, input := renderCall(m.ToolCall.Name, m.ToolCall.Input)
	g.blocks = append(g.blocks, outBlock{Type: "tool_use", ID: cid, Name: name, Input: input})
	g.calls = append(g.calls, pendingCall{orig: m.ToolCall.ID, id: cid, at: i})
	if g.model == "" {
		g.model = m.Model
	}
}

// uniqueID is the tool_use id for raw, the call at msgs[n]: raw as the
// API accepts it (or one made from n), never one given before, since a
// result names its call by it.
func (g *grouping) uniqueID(raw string, n int) string {
	base := toolID(raw)
	if base == "" {
		base = fmt.Sprintf("toolu_cast_%d", n)
	}
	id := base
	for k := 2; g.usedIDs[id]; k++ {
		id = fmt.Sprintf("%s_%d", base, k)
	}
	g.usedIDs[id] = true
	return id
}

// orphanResult adds a tool result with no call before it.
func (g *grouping) orphanResult(m indexed) {
	// No call before it: a bare tool_result would be dropped, so
	// its output is kept as text the model can still read.
	text := fmt.Sprintf("[cast: output of tool call %s, whose call is not in this transcript]\n%s",
		m.ToolResult.CallID, resultText(m.ToolResult))
	g.turns = append(g.turns, turn{role: "user", blocks: []outBlock{{Type: "text", Text: text}}, at: m.Time})
}

// user adds a user turn: its images as blocks, else its text as a string.
func (g *grouping) user(m indexed) {
	if len(m.Images) > 0 {
		var bs []outBlock
		if strings.TrimSpace(m.Text) != "" {
			bs = append(bs, outBlock{Type: "text", Text: m.Text})
		}
		g.turns = append(g.turns, turn{role: "user", blocks: append(bs, imageBlocks(m.Images)...), at: m.Time})
		return
	}
	if m.Text == "" {
		return
	}
	g.turns = append(g.turns, turn{role: "user", text: m.Text, at: m.Time})
}

// flush ends the gathered assistant turn and adds the user turn of its
// calls' results.
func (g *grouping) flush() {
	if len(g.blocks) == 0 {
		return
	}
	g.turns = append(g.turns, turn{role: "assistant", blocks: g.blocks, model: g.model, hasCall: len(g.calls) > 0, at: g.at})
	g.blocks, g.model = nil, ""
	if len(g.calls) == 0 {
		return
	}
	var results []outBlock
	var rat time.Time
	for _, c := range g.calls {
		var content any = missingResult
		isErr := true
		if j, ok := g.take(c); ok {
			r := g.msgs[j].ToolResult
			content, isErr = resultText(r), r.IsError
			if len(g.msgs[j].Images) > 0 {
				// A screenshot the tool took goes back as the
				// image blocks the API takes in a result.
				content = append([]outBlock{{Type: "text", Text: resultText(r)}}, imageBlocks(g.msgs[j].Images)...)
			}
			if rat.IsZero() {
				rat = g.msgs[j].Time
			}
		}
		results = append(results, outBlock{Type: "tool_result", ToolUseID: c.id, Content: content, IsError: &isErr})
	}
	g.turns = append(g.turns, turn{role: "user", blocks: results, at: rat})
	g.calls = nil
}

// take is the place of c's result, the first after c not placed yet,
// and marks it placed.
func (g *grouping) take(c pendingCall) (int, bool) {
	for _, j := range g.resultsFor[c.orig] {
		if j > c.at && !g.consumed[j] {
			g.consumed[j] = true
			return j, true
		}
	}
	return 0, false
}

// resultText is the tool_result content; a failing exit code is stated the
// way Claude's Bash tool states it, so the model reads it as a failure.
func resultText(r *transcript.ToolResult) string {
	out := r.Output
	if r.ExitCode != nil && *r.ExitCode != 0 && !exitRE.MatchString(out) {
		out = fmt.Sprintf("Exit code %d\n%s", *r.ExitCode, out)
	}
	if out == "" {
		out = "(no output)" // an empty tool_result content is shown as "(no content)"
	}
	return out
}
