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
	// Where each call's result sits, so it can be pulled up right behind
	// its call whatever came in between.
	resultsFor := map[string][]int{}
	for i, m := range msgs {
		if m.Kind == transcript.KindToolResult {
			resultsFor[m.ToolResult.CallID] = append(resultsFor[m.ToolResult.CallID], i)
		}
	}
	consumed := map[int]bool{}
	usedIDs := map[string]bool{}
	uniqueID := func(raw string, n int) string {
		base := toolID(raw)
		if base == "" {
			base = fmt.Sprintf("toolu_cast_%d", n)
		}
		id := base
		for k := 2; usedIDs[id]; k++ {
			id = fmt.Sprintf("%s_%d", base, k)
		}
		usedIDs[id] = true
		return id
	}

	var turns []turn
	type pending struct {
		orig, id string
		at       int
	}
	var blocks []outBlock
	var calls []pending
	var model string
	var at time.Time
	flush := func() {
		if len(blocks) == 0 {
			return
		}
		turns = append(turns, turn{role: "assistant", blocks: blocks, model: model, hasCall: len(calls) > 0, at: at})
		blocks, model = nil, ""
		if len(calls) == 0 {
			return
		}
		var results []outBlock
		var rat time.Time
		for _, c := range calls {
			var content any = missingResult
			isErr := true
			for _, j := range resultsFor[c.orig] {
				if j > c.at && !consumed[j] {
					consumed[j] = true
					r := msgs[j].ToolResult
					content, isErr = resultText(r), r.IsError
					if len(msgs[j].Images) > 0 {
						// A screenshot the tool took goes back as the
						// image blocks the API takes in a result.
						content = append([]outBlock{{Type: "text", Text: resultText(r)}}, imageBlocks(msgs[j].Images)...)
					}
					if rat.IsZero() {
						rat = msgs[j].Time
					}
					break
				}
			}
			results = append(results, outBlock{Type: "tool_result", ToolUseID: c.id, Content: content, IsError: &isErr})
		}
		turns = append(turns, turn{role: "user", blocks: results, at: rat})
		calls = nil
	}
	for i, m := range msgs {
		switch m.Kind {
		case transcript.KindAssistant:
			if strings.TrimSpace(m.Text) == "" {
				continue // the API rejects empty text blocks
			}
			if len(calls) > 0 {
				// Text after a call was said after it ran: close the turn
				// so the results come first, as they did.
				flush()
			}
			if len(blocks) == 0 {
				at = m.Time
			}
			blocks = append(blocks, outBlock{Type: "text", Text: m.Text})
			if model == "" {
				model = m.Model
			}
		case transcript.KindThinking:
			// Dropped: Claude replays thinking blocks to the API, which
			// rejects them without the signature only Anthropic can make,
			// and the neutral copy keeps none.
		case transcript.KindToolCall:
			if len(blocks) == 0 {
				at = m.Time
			}
			cid := uniqueID(m.ToolCall.ID, i)
			name, input := renderCall(m.ToolCall.Name, m.ToolCall.Input)
			blocks = append(blocks, outBlock{Type: "tool_use", ID: cid, Name: name, Input: input})
			calls = append(calls, pending{orig: m.ToolCall.ID, id: cid, at: i})
			if model == "" {
				model = m.Model
			}
		case transcript.KindToolResult:
			flush()
			if consumed[i] {
				continue
			}
			// No call before it: a bare tool_result would be dropped, so
			// its output is kept as text the model can still read.
			text := fmt.Sprintf("[cast: output of tool call %s, whose call is not in this transcript]\n%s",
				m.ToolResult.CallID, resultText(m.ToolResult))
			turns = append(turns, turn{role: "user", blocks: []outBlock{{Type: "text", Text: text}}, at: m.Time})
		case transcript.KindUser:
			flush()
			if len(m.Images) > 0 {
				var bs []outBlock
				if strings.TrimSpace(m.Text) != "" {
					bs = append(bs, outBlock{Type: "text", Text: m.Text})
				}
				turns = append(turns, turn{role: "user", blocks: append(bs, imageBlocks(m.Images)...), at: m.Time})
				continue
			}
			if m.Text == "" {
				continue
			}
			turns = append(turns, turn{role: "user", text: m.Text, at: m.Time})
		case transcript.KindNotice:
			flush()
			turns = append(turns, turn{role: "user", meta: true, text: noticeTag.Wrap(m.NoticeType, m.Text), at: m.Time})
		}
	}
	flush()
	return turns
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
