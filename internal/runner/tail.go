package runner

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// fingerprint identifies a message by content, not by native id: a CLI
// that re-expresses its history (gemini's $set.messages on resume) keeps
// the content but not always the ids.
func fingerprint(m transcript.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\x00%s\x00%s\x00", m.Kind, m.NoticeType, strings.TrimSpace(m.Text))
	if c := m.ToolCall; c != nil {
		fmt.Fprintf(&b, "%s\x00%s\x00%s\x00", c.ID, c.Name, c.Input)
	}
	if r := m.ToolResult; r != nil {
		fmt.Fprintf(&b, "%s\x00%s\x00%t\x00", r.CallID, r.Output, r.IsError)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return string(sum[:16])
}

// promptState tracks the search for the turn's own prompt.
type promptState int

const (
	promptLooking promptState = iota
	promptFound
	promptMissed // something else came first: the prompt is not looked for again
)

// matchesPrompt reports whether a recorded user text is the prompt the
// turn was given.
func matchesPrompt(text, prompt string) bool {
	t, p := promptNorm(text), promptNorm(prompt)
	if p == "" {
		return t == ""
	}
	return t == p || strings.Contains(t, p)
}

// isPrompt reports whether a recorded user text is the prompt itself, not
// a text that holds it.
func isPrompt(text, prompt string) bool { return promptNorm(text) == promptNorm(prompt) }

// promptNorm is a prompt's text as compared: trimmed, and without the
// double quotes OpenCode puts around a prompt with spaces.
func promptNorm(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	return s
}

// tailer turns successive reads of one native transcript into the
// messages not seen before.
type tailer struct {
	reader agents.Reader
	// parse, when set, marks an append-only format: only the bytes the
	// turn appended (from offset) are parsed, so a poll costs what the turn
	// wrote, not what the session holds. NativeIDs come out as a whole read
	// gives them (linesBefore numbers position-based ones).
	parse  func(b []byte, linesBefore int) ([]transcript.Message, error)
	offset int64
	lines  int // non-blank lines before offset
	path   string
	known  []string // fingerprints of the accounted prefix of the last read
	// calls are the ids of the tool calls of every read's accounted
	// prefix: a call of another id is the turn's, whatever a rewrite kept
	// or dropped around it (a call's id is its own). Not so a result: it
	// may answer a call older than the turn (one the history left
	// unanswered), and a rewrite may put it among the history's entries.
	calls map[string]bool
	// forked are the fingerprints of a forked session's history, forkedAt
	// how many of them the fork's file has repeated so far.
	forked   []string
	forkedAt int
	// held are the native ids of the entries an append-only file held
	// before the turn. A CLI may append them again (pi, resuming a file
	// with no assistant entry, writes all its entries anew with the first
	// answer): they are history the neutral copy has, never new rows.
	held   map[string]bool
	prompt string
	state  promptState
	// recorded is the prompt's text as the CLI recorded it, once found,
	// and again says the turn it began still runs. A CLI may write the
	// prompt into its file again later in the turn (after a tool call, or
	// rewriting its session): an entry with that text is then the turn's
	// prompt, which the thread holds, not a new message. A user message of
	// other text begins another turn, where that text is the user's again.
	recorded     string
	recordedKind transcript.Kind
	again        bool
	// promptRead caches promptAsRead.
	promptRead struct {
		msg      transcript.Message
		ok, done bool
	}
	// lost: the CLI left its transcript without history it held when the
	// turn began (Gemini has been seen to rewrite a resumed session down
	// to the turn's own entries) and no summary of it (squeezed). What
	// follows the prompt is still this turn's; the native session must be
	// rebuilt before the next.
	lost bool
	size int64
	mod  time.Time
	next time.Time // no re-read before this (throttle for long files)
	logf func(string, ...any)
}

// baseline accounts for what the file holds before the turn.
func (tl *tailer) baseline() {
	if tl.path == "" {
		return
	}
	if _, err := os.Stat(tl.path); err != nil {
		return
	}
	if tl.parse != nil {
		data, err := os.ReadFile(tl.path)
		if err != nil {
			tl.logf("runner: baseline read %s: %v", tl.path, err)
			return
		}
		// Up to the last complete line: the CLI is not running yet, so
		// that is the whole file.
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			data = data[:i+1]
		} else {
			data = nil
		}
		tl.offset, tl.lines = int64(len(data)), nonBlankLines(data)
		tl.holdIDs(data)
		return
	}
	msgs, err := tl.reader.Read(tl.path)
	if err != nil {
		tl.logf("runner: baseline read %s: %v", tl.path, err)
		return
	}
	tl.known = make([]string, len(msgs))
	for i, m := range msgs {
		tl.known[i] = fingerprint(m)
	}
	tl.account(msgs)
}

// account records the tool calls of msgs, entries of an accounted prefix
// (see calls).
func (tl *tailer) account(msgs []transcript.Message) {
	for _, m := range msgs {
		if m.ToolCall == nil {
			continue
		}
		if tl.calls == nil {
			tl.calls = map[string]bool{}
		}
		tl.calls[m.ToolCall.ID] = true
	}
}

// firstUnseen is where the first tool call of msgs is of an id no
// accounted prefix held, or -1: the turn made it, so it and what follows
// it are the turn's.
func (tl *tailer) firstUnseen(msgs []transcript.Message) int {
	for i, m := range msgs {
		if m.ToolCall != nil && m.ToolCall.ID != "" && !tl.calls[m.ToolCall.ID] {
			return i
		}
	}
	return -1
}

// poll re-reads the file when it changed (always when final) and emits
// what is new. Returns false when the file could not be read.
func (tl *tailer) poll(final bool, out func(transcript.Message)) bool {
	fi, err := os.Stat(tl.path)
	if err != nil {
		return false
	}
	if !final && fi.Size() == tl.size && fi.ModTime().Equal(tl.mod) {
		return true
	}
	if !final && time.Now().Before(tl.next) {
		return true // the last read was costly: keep reading to a fraction of a core
	}
	began := time.Now()
	msgs, err := tl.read(fi.Size())
	if err != nil {
		return false
	}
	// A whole re-read of a long session costs ~0.2 s per 10k messages
	// (BenchmarkPoll10k): wait 4x the last read's cost before the next.
	tl.next = time.Now().Add(4 * time.Since(began))
	tl.size, tl.mod = fi.Size(), fi.ModTime()
	if !tl.feed(msgs, final, out) {
		tl.size = -1 // read again next time even if unchanged
	}
	return true
}

// read returns the messages of the whole file, or of what was appended
// after offset for an append-only format.
func (tl *tailer) read(size int64) ([]transcript.Message, error) {
	if tl.parse == nil {
		return tl.reader.Read(tl.path)
	}
	if size < tl.offset {
		return nil, fmt.Errorf("runner: %s shrank below the turn's start (%d < %d bytes)", tl.path, size, tl.offset)
	}
	f, err := os.Open(tl.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, tl.offset, 1<<62))
	if err != nil {
		return nil, err
	}
	// Complete lines only: the CLI may be writing the last one.
	i := bytes.LastIndexByte(data, '\n')
	if i < 0 {
		return nil, nil
	}
	data = data[:i+1]
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	return tl.parse(data, tl.lines)
}

// holdIDs records the native ids of the entries in data, the file as
// the turn found it.
func (tl *tailer) holdIDs(data []byte) {
	if len(bytes.TrimSpace(data)) == 0 {
		return
	}
	msgs, err := tl.parse(data, 0)
	if err != nil {
		tl.logf("runner: baseline parse %s: %v", tl.path, err)
		return
	}
	tl.held = make(map[string]bool, len(msgs))
	for _, m := range msgs {
		if m.NativeID != "" {
			tl.held[m.NativeID] = true
		}
	}
	tl.account(msgs)
}

func nonBlankLines(data []byte) int {
	n := 0
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			n++
		}
	}
	return n
}

// feed emits msgs past the accounted prefix. An assistant or thinking text
// that is the newest entry is held back unless final: it may still grow.
func (tl *tailer) feed(msgs []transcript.Message, final bool, out func(transcript.Message)) bool {
	fps := make([]string, len(msgs))
	for i, m := range msgs {
		fps[i] = fingerprint(m)
	}
	start, prompt, ok := tl.align(msgs, fps)
	if !ok && !final {
		return false
	}
	if !ok {
		start, prompt = tl.afterLostHistory(msgs, fps), -1
	}
	if at := tl.squeezed(msgs, fps, start); at >= 0 {
		out(summary(msgs, at, start))
	}
	i := start
	for ; i < len(msgs); i++ {
		m := msgs[i]
		if !final && i == len(msgs)-1 && (m.Kind == transcript.KindAssistant || m.Kind == transcript.KindThinking) {
			break
		}
		if tl.forked != nil && tl.skipForked(fps[i]) {
			continue
		}
		if m.NativeID != "" && tl.held[m.NativeID] {
			continue
		}
		if tl.promptAgain(m) {
			tl.logf("runner: the turn's prompt written again (%s); not a new message", m.NativeID)
			continue
		}
		switch {
		case tl.state != promptLooking:
		case i < prompt:
			// Written before the prompt's record by a CLI that rewrote its
			// session (a model turn Gemini adds to close an interrupted
			// one): not the turn's answer, and the prompt is still to come.
		default:
			if tl.recordsPrompt(m) {
				tl.found(m)
				continue
			}
			// A compaction summary the CLI wrote as the turn began (its
			// /compact, or a long history compacted before the prompt)
			// comes before the prompt record: emitted, and the prompt is
			// still looked for, else it was stored as a second user message.
			if m.Kind != transcript.KindNotice || m.NoticeType != transcript.NoticeCompactionSummary {
				tl.state = promptMissed
				tl.logf("runner: first new entry of the turn is not the prompt (%s %q)", m.Kind, clip(m.Text, 80))
			}
		}
		if m.Kind == transcript.KindUser {
			tl.again = false // another turn
		}
		out(m)
	}
	tl.account(msgs[:i])
	tl.known = fps[:i]
	return true
}

// recordsPrompt reports whether m is the CLI's record of the turn's prompt: a
// user entry of its text, or what the reader reads such a record as when
// that is not the prompt's text (agents.PromptReader: a prompt in Claude
// Code's command markup, which was stored as a second message).
func (tl *tailer) recordsPrompt(m transcript.Message) bool {
	if m.Kind == transcript.KindUser && matchesPrompt(m.Text, tl.prompt) {
		return true
	}
	p, ok := tl.promptAsRead()
	return ok && m.Kind == p.Kind && m.NoticeType == p.NoticeType && strings.TrimSpace(m.Text) == strings.TrimSpace(p.Text)
}

// promptAsRead is what the reader reads the CLI's record of the prompt as
// when that is not its text (agents.PromptReader), worked out once a turn:
// it is asked of every new entry while the prompt is looked for, and of
// every entry of a rewritten file.
func (tl *tailer) promptAsRead() (transcript.Message, bool) {
	if !tl.promptRead.done {
		tl.promptRead.done = true
		if pr, ok := tl.reader.(agents.PromptReader); ok {
			tl.promptRead.msg, tl.promptRead.ok = pr.ReadPrompt(tl.prompt)
		}
	}
	return tl.promptRead.msg, tl.promptRead.ok
}

// found records m as the turn's prompt.
func (tl *tailer) found(m transcript.Message) {
	tl.state = promptFound
	tl.recorded, tl.recordedKind, tl.again = strings.TrimSpace(m.Text), m.Kind, true
}

// promptAgain reports whether m is the turn's prompt written again within
// the turn (see recorded).
func (tl *tailer) promptAgain(m transcript.Message) bool {
	return tl.again && m.Kind == tl.recordedKind && strings.TrimSpace(m.Text) == tl.recorded
}

// afterLostHistory is where the turn's own unemitted entries start in the
// final read of a file that no longer holds what was accounted: after the
// newest user entry that is the prompt and the entries after it already
// emitted, or nowhere when the prompt is not there (old and new entries
// cannot be told apart then).
func (tl *tailer) afterLostHistory(msgs []transcript.Message, fps []string) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if !tl.recordsPrompt(msgs[i]) {
			continue
		}
		if tl.state == promptLooking {
			tl.found(msgs[i])
		}
		emitted := tl.knownSet()
		j := i + 1
		for j < len(fps) && emitted[fps[j]] {
			j++
		}
		tl.lose(msgs, fps, j)
		return j
	}
	tl.logf("runner: %s lost its history and the turn's prompt is not in it; nothing of the turn is taken from it", tl.path)
	tl.lose(msgs, fps, len(msgs))
	return len(msgs)
}

// align returns where the unaccounted messages start in fps. Normally the
// accounted fingerprints are a prefix of fps. A CLI that rewrites its
// session may add entries between them, drop the older ones (Gemini's $set
// of a compressed history, or of the turn's own entries only), or express
// some again in other words (a tool output masked or truncated), so the
// newest accounted entry the read still holds is found, with the run of
// accounted entries before it that the read holds in order; the accounted
// entries after it are taken for expressed again in place (the count
// decides there), and what follows them is new. While the turn's prompt is
// looked for, what is new begins at the latest at the prompt's entry, and
// prompt is where the prompt's own record is (-1 when not so found): new
// entries before it the CLI wrote before the prompt. ok is false for a read
// too short for that: a file caught in the middle of a rewrite, skipped
// until it is whole again.
func (tl *tailer) align(msgs []transcript.Message, fps []string) (start, prompt int, ok bool) {
	n := len(tl.known)
	if n == 0 {
		return 0, -1, true
	}
	if len(fps) >= n && slices.Equal(fps[:n], tl.known) {
		return n, -1, true
	}
	held := make(map[string]bool, len(fps))
	for _, fp := range fps {
		held[fp] = true
	}
	k := n - 1 // the newest accounted entry the read holds
	for k >= 0 && !held[tl.known[k]] {
		k--
	}
	last := -1 // where the read holds it
	if k >= 0 {
		// s: the oldest of the run ending at k the read holds in order
		// (greedy from the end finds the longest run) ...
		s := k + 1
		for i := len(fps) - 1; i >= 0 && s > 0; i-- {
			if fps[i] == tl.known[s-1] {
				s--
			}
		}
		// ... and the run's earliest place: a later entry of the same
		// content is the turn's.
		for i, j := 0, s; i < len(fps) && j <= k; i++ {
			if fps[i] == tl.known[j] {
				j++
				last = i
			}
		}
	}
	start = last + 1 + (n - 1 - k)
	// A tool call no read held is the turn's, and so is what follows it:
	// the accounted entries the read holds after it are the turn's too,
	// of the same content (the newest history entry "Done." and the
	// turn's answer), and a read that holds none of the accounted entries
	// (a squeeze that dropped them and the prompt) has no anchor else.
	unseen := tl.firstUnseen(msgs)
	if unseen >= 0 && unseen < start {
		start = unseen
	}
	prompt = tl.promptAt(msgs, fps, last, unseen)
	if prompt >= 0 && prompt < start {
		start = prompt
	}
	if prompt >= 0 && !isPrompt(msgs[prompt].Text, tl.prompt) {
		prompt = -1 // only holds the prompt: what comes before may be the turn's
	}
	if k < n-1 {
		tl.logf("runner: %s: the newest %d of %d known entries not found on re-read (%d entries now)", tl.path, n-1-k, n, len(fps))
	}
	if start > len(fps) {
		return len(fps), -1, false
	}
	if start < n {
		tl.lose(msgs, fps, start)
	}
	return start, prompt, true
}

// promptAt is where the turn's prompt is in msgs while it is looked for
// (-1 when it is not there): the first entry that is the prompt itself and
// was not accounted, even before last (the history may be gone and an
// entry of the turn the same as its newest, an answer "Done." again, is
// never the prompt record); else the newest entry that is the prompt
// itself before unseen, the turn's first tool call (see firstUnseen),
// though the history holds its text; else the first entry after last that
// holds the prompt (one before then that only holds it, a summary of the
// history the CLI wrote, is not the prompt).
func (tl *tailer) promptAt(msgs []transcript.Message, fps []string, last, unseen int) int {
	if tl.state != promptLooking {
		return -1
	}
	known := tl.knownSet()
	for i, m := range msgs {
		if m.Kind == transcript.KindUser && isPrompt(m.Text, tl.prompt) && !known[fps[i]] {
			return i
		}
	}
	// The user sent a text the history holds ("continue", "do it"): the
	// turn begins with its prompt, so the newest such entry before the
	// turn's first tool call is its record, not the history's.
	for i := unseen - 1; i >= 0; i-- {
		if msgs[i].Kind == transcript.KindUser && isPrompt(msgs[i].Text, tl.prompt) {
			return i
		}
	}
	for i := last + 1; i < len(msgs); i++ {
		if msgs[i].Kind == transcript.KindUser && matchesPrompt(msgs[i].Text, tl.prompt) {
			return i
		}
	}
	return -1
}

// knownSet is the fingerprints of the accounted prefix, as a set.
func (tl *tailer) knownSet() map[string]bool {
	known := make(map[string]bool, len(tl.known))
	for _, fp := range tl.known {
		known[fp] = true
	}
	return known
}

// lose records that a read (msgs, new from start) holds fewer entries up
// to what is new than the accounted: history the CLI held is gone, unless
// it put a summary of it in its place (squeezed).
func (tl *tailer) lose(msgs []transcript.Message, fps []string, start int) {
	if tl.squeezed(msgs, fps, start) >= 0 {
		tl.logf("runner: %s was compacted (%d accounted, %d entries now, a summary in place of the rest)", tl.path, len(tl.known), len(msgs))
		return
	}
	if !tl.lost {
		tl.logf("runner: %s was rewritten without entries it held (%d accounted, %d entries now)", tl.path, len(tl.known), len(msgs))
	}
	tl.lost = true
}

// squeezed is where msgs holds before start the newest compaction summary
// no accounted read held, or -1: the CLI put it in place of the entries it
// dropped (Gemini compressing a long history), so its session is whole for
// it. Rebuilt from the neutral copy, it held all of the history again,
// which the CLI compressed again, at every turn after.
func (tl *tailer) squeezed(msgs []transcript.Message, fps []string, start int) int {
	var known map[string]bool
	for i := min(start, len(msgs)) - 1; i >= 0; i-- {
		m := &msgs[i]
		if m.Kind != transcript.KindNotice || m.NoticeType != transcript.NoticeCompactionSummary || strings.TrimSpace(m.Text) == "" {
			continue
		}
		if i < len(tl.known) && tl.known[i] == fps[i] {
			continue // accounted in place: a read that only added entries
		}
		if known == nil {
			known = tl.knownSet()
		}
		if !known[fps[i]] {
			return i
		}
	}
	return -1
}

// summary is the compaction summary at msgs[at], before start (squeezed),
// as the neutral copy stores it: holding the user's messages the CLI kept
// after it (Gemini keeps the newest entries verbatim), which the copy
// already holds before it (transcript.WithKept). Nothing else stores it:
// the entries before start are accounted, never emitted.
func summary(msgs []transcript.Message, at, start int) transcript.Message {
	m := msgs[at]
	var kept []string
	for _, k := range msgs[at+1 : start] {
		if k.Kind == transcript.KindUser && strings.TrimSpace(k.Text) != "" {
			kept = append(kept, k.Text)
		}
	}
	m.Text = transcript.WithKept(m.Text, kept)
	return m
}
