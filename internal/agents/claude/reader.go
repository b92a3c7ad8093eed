package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// Reader reads Claude Code JSONL transcripts. The zero value is ready.
type Reader struct{}

// Stats counts what Parse saw.
type Stats struct {
	Lines     int // non-empty lines
	Malformed int // lines that were not a JSON object or lacked a usable message
	Skipped   int // valid records (and content blocks) left out: attachments, sidechains, meta, ...
	// Kinds counts every line left out (malformed ones included) by what it
	// was, so an import can say what it did not keep.
	Kinds kit.Skips
	// Subagent is set when the file holds only a subagent's run (sidechain
	// records and nothing else), which Parse then reads as the conversation.
	Subagent *agents.Subagent
	// side are the sidechain records left out of a main chain (the runs
	// an older CLI kept inside the session's file), for ReadRuns.
	side []entry
	// calls maps a subagent's agentId to the main chain's tool call whose
	// result names it (older CLIs stamp the Task result's record).
	calls map[string]string
}

func (st *Stats) skip(kind string) {
	if kind == kindMalformed {
		st.Malformed++
	} else {
		st.Skipped++
	}
	st.Kinds.Add(kind)
}

// bookkeeping are record types Claude Code keeps for itself (its prompt
// queue, titles, file backups, modes, the agent's name); never
// conversation, so not reported. ai-title, permission-mode and agent-name
// came with the 2.1 releases (shared/research/anchors-peers-3.md).
var bookkeeping = map[string]bool{
	"queue-operation": true, "last-prompt": true, "summary": true, "custom-title": true,
	"file-history-snapshot": true, "mode": true, "ai-title": true, "permission-mode": true,
	"agent-name": true,
}

// regenerated tells the attachments Claude Code builds afresh for every
// session (agent and skill listings and their deltas): not carried, and not
// worth a word. Others (a file the user mentioned) are reported.
func regenerated(rec record) bool {
	if rec.Type != "attachment" || rec.Attachment == nil {
		return false
	}
	t := rec.Attachment.Type
	return strings.HasSuffix(t, "_listing") || strings.HasSuffix(t, "_delta")
}

// Kinds of left-out lines that are not a record type of their own.
const (
	kindMalformed = "malformed line"
	kindSidechain = "sub-agent record"
	kindRewound   = "record of a rewound branch"
	kindRepeated  = "repeated assistant record"
	kindMeta      = "injected context (isMeta)"
	kindSynthetic = "synthetic assistant record"
	kindBadBlock  = "content block that did not decode"
)

// Read reads the file at path. Malformed lines are skipped; an error is
// returned only when the file cannot be read or nothing at all could be
// parsed from a non-empty file.
func (Reader) Read(path string) ([]transcript.Message, error) {
	msgs, _, err := ReadFile(path)
	return msgs, err
}

// ReadPrompt is what Claude Code's record of a prompt it was given reads
// as: a user record of the prompt as typed, through the reader's own
// conversion (agents.PromptReader).
func (Reader) ReadPrompt(prompt string) (transcript.Message, bool) {
	msg, err := json.Marshal(map[string]string{"role": "user", "content": prompt})
	if err != nil {
		return transcript.Message{}, false
	}
	msgs, _ := convert(record{Type: "user", Message: msg}, func(string) {})
	if len(msgs) != 1 || (msgs[0].Kind == transcript.KindUser && msgs[0].Text == prompt) {
		return transcript.Message{}, false
	}
	return msgs[0], true
}

// ReadReport implements agents.ReportingReader.
func (Reader) ReadReport(path string) ([]transcript.Message, map[string]int, error) {
	msgs, st, err := ReadFile(path)
	return msgs, st.Kinds, err
}

// ReadSubagent implements agents.SubagentReader: a file of sidechain
// records only (Claude Code's subagents/agent-*.jsonl) is a subagent's run;
// its records name the parent session, and the agent-*.meta.json beside it
// (newer CLIs) the parent's tool call.
func (Reader) ReadSubagent(path string) (agents.Subagent, bool, error) {
	_, st, err := ReadFile(path)
	if err != nil || st.Subagent == nil {
		return agents.Subagent{}, false, err
	}
	s := *st.Subagent
	var meta struct {
		ToolUseID string `json:"toolUseId"`
	}
	if agents.ReadJSON(strings.TrimSuffix(path, ".jsonl")+".meta.json", &meta) {
		s.CallID = meta.ToolUseID
	}
	return s, true, nil
}

// ReadCwd implements agents.CwdReader: the cwd of the newest record that
// has one (Claude Code stamps every record with the folder it ran in).
func (Reader) ReadCwd(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	cwd := ""
	for {
		line, err := br.ReadBytes('\n')
		var rec struct {
			Cwd string `json:"cwd"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Cwd != "" {
			cwd = rec.Cwd
		}
		if err == io.EOF {
			return cwd, nil
		}
		if err != nil {
			return "", err
		}
	}
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
				st.Kinds.Add(kit.Undecoded(line))
			case rec.IsSidechain:
				// A sub-agent's own conversation: its result reaches the
				// main chain as the Task tool's result. Kept aside for a
				// file that holds nothing else (subagents/agent-*.jsonl).
				st.skip(kindSidechain)
				if rec.Type == "user" || rec.Type == "assistant" || rec.UUID != "" {
					side = append(side, entry{rec, n})
				}
			case rec.Type == "user" || rec.Type == "assistant":
				if len(rec.Message) == 0 || rec.Message[0] != '{' {
					st.skip(kindMalformed)
				} else {
					chain = append(chain, entry{rec, n})
					st.noteCall(rec)
				}
			case rec.UUID != "":
				// Attachments, system records, progress: not conversation,
				// but links of the parent chain.
				chain = append(chain, entry{rec, n})
			case rec.Type == "":
				st.skip(kindMalformed)
			case bookkeeping[rec.Type]:
				st.Skipped++
			default:
				st.skip(rec.Type)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, st, err
		}
	}
	if len(chain) > 0 {
		st.side = side
	}
	if len(chain) == 0 && len(side) > 0 {
		chain = side
		st.Subagent = &agents.Subagent{Kind: "sidechain", ParentNativeID: side[0].rec.SessionID}
		st.Skipped -= len(side)
		if st.Kinds[kindSidechain] -= len(side); st.Kinds[kindSidechain] <= 0 {
			delete(st.Kinds, kindSidechain)
		}
	}
	path := withParallelBranches(chain, activePath(chain))
	for range len(chain) - len(path) {
		st.skip(kindRewound)
	}
	return st.messages(path), st, nil
}

// messages converts the records of path, counting in st what it leaves
// out.
func (st *Stats) messages(path []entry) []transcript.Message {
	var out []transcript.Message
	seen := map[string]bool{}
	for _, e := range path {
		rec, fresh := dropRepeats(e.rec, seen)
		if !fresh {
			st.skip(kindRepeated)
			continue
		}
		msgs, ok := convert(rec, st.skip)
		switch {
		case ok:
		case regenerated(rec):
			st.Skipped++
		default:
			st.skip(leftOut(rec))
		}
		out = append(out, msgs...)
	}
	return out
}

// leftOut names a chain record convert kept nothing of.
func leftOut(rec record) string {
	switch {
	case rec.IsMeta:
		return kindMeta
	case rec.Type == "assistant":
		return kindSynthetic
	case rec.Type == "user":
		return "empty user record"
	case rec.Subtype != "":
		return rec.Type + " (" + rec.Subtype + ")"
	case rec.Attachment != nil && rec.Attachment.Type != "":
		return rec.Type + " (" + rec.Attachment.Type + ")"
	}
	return rec.Type
}

// dropRepeats removes from an assistant record the content blocks an
// earlier record of the same API message (message.id) already held. Claude
// Code writes a streamed message one block a line, all under one id, and at
// times writes a whole message twice; a block seen before under its id is a
// copy. fresh is false when nothing new is left.
func dropRepeats(rec record, seen map[string]bool) (out record, fresh bool) {
	if rec.Type != "assistant" {
		return rec, true
	}
	var msg map[string]json.RawMessage
	var id string
	var items []json.RawMessage
	if json.Unmarshal(rec.Message, &msg) != nil || json.Unmarshal(msg["id"], &id) != nil || id == "" ||
		json.Unmarshal(msg["content"], &items) != nil {
		return rec, true
	}
	var kept []json.RawMessage
	var keys []string
	for _, it := range items {
		key := id + "\x00" + compactJSON(it)
		if !seen[key] { // seen in an earlier record, not this one
			kept, keys = append(kept, it), append(keys, key)
		}
	}
	for _, k := range keys {
		seen[k] = true
	}
	if len(kept) == len(items) {
		return rec, true
	}
	if len(kept) == 0 {
		return rec, false
	}
	msg["content"], _ = json.Marshal(kept)
	rec.Message, _ = json.Marshal(msg)
	return rec, true
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
