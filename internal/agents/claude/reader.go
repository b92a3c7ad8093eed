package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/transcript"
)

// Reader reads Claude Code JSONL transcripts. The zero value is ready.
type Reader struct{}

// Stats counts what Parse saw.
type Stats struct {
	Lines     int // non-empty lines
	Malformed int // lines that were not a JSON object or lacked a usable message
	Skipped   int // valid records that carry no conversation (attachments, sidechains, meta, ...)
}

// Read reads the file at path. Malformed lines are skipped; an error is
// returned only when the file cannot be read or nothing at all could be
// parsed from a non-empty file.
func (Reader) Read(path string) ([]transcript.Message, error) {
	msgs, _, err := ReadFile(path)
	return msgs, err
}

// ReadFile is Read that also reports what was skipped (import shows it).
func ReadFile(path string) ([]transcript.Message, Stats, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Stats{}, err
	}
	defer f.Close()
	msgs, st, err := Parse(f)
	if err != nil {
		return nil, st, err
	}
	if len(msgs) == 0 && st.Malformed > 0 && st.Malformed == st.Lines {
		return nil, st, fmt.Errorf("claude: %s: none of %d lines is a Claude Code record", path, st.Lines)
	}
	return msgs, st, nil
}

// entry is a parsed chain record with its position in the file.
type entry struct {
	rec  record
	line int
}

// Parse reads a transcript from r. It follows the conversation Claude itself
// would resume: the chain from the last record back to the root, which skips
// branches abandoned by a rewind. When the chain is broken (old or
// hand-written files with null or dangling parents) it falls back to file
// order, so no turn is lost.
func Parse(r io.Reader) ([]transcript.Message, Stats, error) {
	var st Stats
	var chain, side []entry
	br := bufio.NewReaderSize(r, 1<<20)
	for n := 0; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			st.Lines++
			var rec record
			switch {
			case json.Unmarshal(line, &rec) != nil:
				st.Malformed++
			case rec.IsSidechain:
				// A sub-agent's own conversation: its result reaches the
				// main chain as the Task tool's result. Kept aside for a
				// file that holds nothing else (subagents/agent-*.jsonl).
				st.Skipped++
				if rec.Type == "user" || rec.Type == "assistant" || rec.UUID != "" {
					side = append(side, entry{rec, n})
				}
			case rec.Type == "user" || rec.Type == "assistant":
				if len(rec.Message) == 0 || rec.Message[0] != '{' {
					st.Malformed++
				} else {
					chain = append(chain, entry{rec, n})
				}
			case rec.UUID != "":
				// Attachments, system records, progress: not conversation,
				// but links of the parent chain.
				chain = append(chain, entry{rec, n})
			case rec.Type == "":
				st.Malformed++
			default:
				st.Skipped++ // summary, attachment, queue-operation, last-prompt, mode, ...
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, st, err
		}
	}
	if len(chain) == 0 {
		chain = side
		st.Skipped -= len(side)
	}
	var out []transcript.Message
	for _, e := range activePath(chain) {
		msgs, ok := convert(e.rec)
		if !ok {
			st.Skipped++
		}
		out = append(out, msgs...)
	}
	return out, st, nil
}

// activePath returns the leaf-to-root chain in order when it reaches the
// first record of the file, and every record in file order otherwise.
func activePath(chain []entry) []entry {
	if len(chain) == 0 {
		return nil
	}
	byUUID := make(map[string]int, len(chain))
	for i, e := range chain {
		if e.rec.UUID != "" {
			byUUID[e.rec.UUID] = i
		}
	}
	var path []int
	seen := map[int]bool{}
	for i := len(chain) - 1; ; {
		if seen[i] {
			return chain // a cycle: trust nothing but the file order
		}
		seen[i] = true
		path = append(path, i)
		parent := ""
		if p := chain[i].rec.ParentUUID; p != nil {
			parent = *p
		}
		if parent == "" {
			parent = chain[i].rec.LogicalParentUUID // across a compaction
		}
		if parent == "" {
			break
		}
		j, ok := byUUID[parent]
		if !ok {
			return chain // dangling parent: Claude repairs in file order too
		}
		i = j
	}
	if path[len(path)-1] != 0 {
		return chain
	}
	out := make([]entry, len(path))
	for k, i := range path {
		out[len(path)-1-k] = chain[i]
	}
	return out
}

// convert turns one record into neutral messages; ok is false when the
// record carries nothing for the conversation.
func convert(rec record) ([]transcript.Message, bool) {
	if rec.Type != "user" && rec.Type != "assistant" {
		return nil, false
	}
	var m apiMessage
	if json.Unmarshal(rec.Message, &m) != nil {
		return nil, false
	}
	base := transcript.Message{Agent: Agent, NativeID: rec.UUID, Time: parseTime(rec.Timestamp)}
	var out []transcript.Message
	add := func(msg transcript.Message) {
		if len(out) > 0 {
			msg.NativeID = fmt.Sprintf("%s#%d", rec.UUID, len(out))
		}
		out = append(out, msg)
	}
	if rec.Type == "assistant" {
		// Synthetic turns ("No response requested.", API errors) were
		// written by the CLI, not said by a model.
		if m.Model == "<synthetic>" || rec.IsAPIErrorMessage {
			return nil, false
		}
		base.Model = m.Model
		for _, b := range blocks(m.Content) {
			msg := base
			switch b.Type {
			case "text":
				if b.Text == "" {
					continue
				}
				msg.Kind, msg.Text = transcript.KindAssistant, b.Text
			case "thinking":
				if b.Thinking == "" {
					continue
				}
				msg.Kind, msg.Text = transcript.KindThinking, b.Thinking
			case "tool_use", "server_tool_use":
				msg.Kind = transcript.KindToolCall
				msg.ToolCall = &transcript.ToolCall{ID: b.ID, Name: b.Name, Input: compactJSON(b.Input)}
			default:
				if strings.HasSuffix(b.Type, "_tool_result") { // server tools (web search)
					msg.Kind = transcript.KindToolResult
					msg.ToolResult = &transcript.ToolResult{CallID: b.ToolUseID, Output: flatten(b.Content)}
				} else {
					continue // redacted_thinking and unknown future blocks
				}
			}
			add(msg)
		}
		return out, len(out) > 0
	}

	// User records.
	if rec.IsMeta {
		// Context the CLI injected (caveats, skill bodies) is regenerated on
		// resume, except cast's own notices.
		if typ, text, ok := unwrapNotice(flatten(m.Content)); ok && typ != omittedType {
			msg := base
			msg.Kind, msg.NoticeType, msg.Text = transcript.KindNotice, typ, text
			return []transcript.Message{msg}, true
		}
		return nil, false
	}
	if rec.IsCompactSummary {
		msg := base
		msg.Kind, msg.NoticeType = transcript.KindNotice, transcript.NoticeCompactionSummary
		msg.Text = flatten(m.Content)
		return []transcript.Message{msg}, true
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		if t := stripReminders(s); t != "" {
			msg := base
			msg.Kind, msg.Text = transcript.KindUser, t
			add(msg)
		}
		return out, len(out) > 0
	}
	for _, b := range blocks(m.Content) {
		msg := base
		switch b.Type {
		case "text":
			t := stripReminders(b.Text)
			if t == "" {
				continue
			}
			msg.Kind, msg.Text = transcript.KindUser, t
		case "image", "document":
			msg.Kind, msg.Text = transcript.KindUser, "["+b.Type+" omitted]"
		case "tool_result":
			out := flatten(b.Content)
			res := &transcript.ToolResult{CallID: b.ToolUseID, Output: out, IsError: b.IsError}
			res.ExitCode = exitCode(out, b.IsError, rec.ToolUseResult)
			msg.Kind, msg.ToolResult = transcript.KindToolResult, res
		default:
			continue
		}
		add(msg)
	}
	return out, len(out) > 0
}

func blocks(raw json.RawMessage) []block {
	var bs []block
	if json.Unmarshal(raw, &bs) != nil {
		// Blocks are decoded one by one so a single odd block (a string
		// inside the list, say) does not lose its neighbours.
		bs = nil // a failed decode leaves a partial list behind
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for _, it := range items {
			var b block
			if json.Unmarshal(it, &b) == nil {
				bs = append(bs, b)
			}
		}
	}
	return bs
}

// flatten renders tool_result content (a string or a list of blocks) as
// text; non-text blocks leave a placeholder so their presence is not lost.
func flatten(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []string
	for _, b := range blocks(raw) {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "":
		default:
			parts = append(parts, "["+b.Type+" omitted]")
		}
	}
	if parts == nil {
		return compactJSON(raw)
	}
	return strings.Join(parts, "\n")
}

var exitRE = regexp.MustCompile(`^(?:Error: )?Exit code (-?\d+)\b`)

// exitCode recovers a shell exit code where the transcript shows one: the
// Bash tool reports failures as "Exit code N" and success as a structured
// stdout/stderr result without an error flag.
func exitCode(out string, isErr bool, tur json.RawMessage) *int32 {
	if m := exitRE.FindStringSubmatch(out); m != nil {
		if n, err := strconv.ParseInt(m[1], 10, 32); err == nil {
			c := int32(n)
			return &c
		}
	}
	if isErr || len(tur) == 0 || tur[0] != '{' {
		return nil
	}
	var r struct {
		Stdout      *string `json:"stdout"`
		Interrupted bool    `json:"interrupted"`
	}
	if json.Unmarshal(tur, &r) == nil && r.Stdout != nil && !r.Interrupted {
		c := int32(0)
		return &c
	}
	return nil
}

var reminderRE = regexp.MustCompile(`(?s)<system-reminder>.*?</system-reminder>`)

// stripReminders removes the <system-reminder> blocks Claude Code adds to
// user text: it adds them again on every request, so keeping them would
// duplicate them into every transcript cast writes.
func stripReminders(s string) string {
	if !strings.Contains(s, "<system-reminder>") {
		return s
	}
	return strings.TrimSpace(reminderRE.ReplaceAllString(s, ""))
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
