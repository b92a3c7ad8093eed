package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/transcript"
)

func user(id, text string) transcript.Message {
	return transcript.Message{Kind: transcript.KindUser, Text: text, NativeID: id}
}

func asst(id, text string) transcript.Message {
	return transcript.Message{Kind: transcript.KindAssistant, Text: text, NativeID: id}
}

func call(id, cid string) transcript.Message {
	return transcript.Message{Kind: transcript.KindToolCall, NativeID: id, ToolCall: &transcript.ToolCall{ID: cid, Name: "bash", Input: "{}"}}
}

func result(id, cid, out string) transcript.Message {
	return transcript.Message{Kind: transcript.KindToolResult, NativeID: id, ToolResult: &transcript.ToolResult{CallID: cid, Output: out}}
}

func collect(tl *tailer, msgs []transcript.Message, final bool) []string {
	var ids []string
	tl.feed(msgs, final, func(m transcript.Message) { ids = append(ids, m.NativeID) })
	return ids
}

func eq(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("emitted %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("emitted %v, want %v", got, want)
		}
	}
}

// readAll feeds tl successive reads of a file, the last one final, and
// checks that it emitted want and found the prompt.
func readAll(t *testing.T, tl *tailer, reads [][]transcript.Message, want ...string) {
	t.Helper()
	var got []string
	for i, r := range reads {
		got = append(got, collect(tl, r, i == len(reads)-1)...)
	}
	eq(t, got, want...)
	if tl.state != promptFound {
		t.Fatalf("prompt state %v, want found", tl.state)
	}
}

func newTailer(prompt string, known ...transcript.Message) *tailer {
	tl := &tailer{prompt: prompt, logf: func(string, ...any) {}}
	for _, m := range known {
		tl.known = append(tl.known, fingerprint(m))
	}
	tl.account(known)
	return tl
}

func TestTailerEmitsEachOnceAndSkipsPrompt(t *testing.T) {
	old := []transcript.Message{user("u0", "earlier"), asst("a0", "earlier answer")}
	tl := newTailer("do it", old...)
	step1 := append(append([]transcript.Message(nil), old...), user("u1", "do it"), call("c1", "x"))
	eq(t, collect(tl, step1, false), "c1")
	eq(t, collect(tl, step1, false)) // re-read: nothing new
	if tl.state != promptFound {
		t.Fatal("prompt not recognised")
	}
	step2 := append(step1, result("r1", "x", "ok"), asst("a1", "part"))
	eq(t, collect(tl, step2, false), "r1") // the growing answer is held back
	step3 := append(step1, result("r1", "x", "ok"), asst("a1", "partial and complete"))
	eq(t, collect(tl, step3, true), "a1")
	eq(t, collect(tl, step3, true))
}

func TestTailerPromptQuotedAndMissed(t *testing.T) {
	tl := newTailer("hello there")
	eq(t, collect(tl, []transcript.Message{user("u", `"hello there"`), asst("a", "hi")}, true), "a")
	tl = newTailer("hello")
	eq(t, collect(tl, []transcript.Message{asst("a", "unprompted"), user("u", "hello")}, true), "a", "u")
	if tl.state != promptMissed {
		t.Fatal("want promptMissed")
	}
	// So in a session the CLI rewrote (a tool output masked): an entry
	// before the prompt's own record was written before the prompt (see
	// TestTailerHistoryShrinksThenTurnGrows), but a user message that only
	// holds the prompt's text after the turn's first entry is the user's.
	old := []transcript.Message{user("u0", "q"), call("c0", "w"), result("r0", "w", "out"), asst("a0", "done")}
	tl = newTailer("hello", old...)
	eq(t, collect(tl, []transcript.Message{user("u0", "q"), call("c0", "w"), result("R0", "w", "masked"), asst("a0", "done"),
		asst("a", "unprompted"), user("u", "hello, and more")}, true), "a", "u")
	if tl.state != promptMissed {
		t.Fatal("want promptMissed in a rewritten session")
	}
}

func TestTailerRealignsRewrittenHistory(t *testing.T) {
	old := []transcript.Message{user("u0", "q"), call("c0", "x"), result("r0", "x", "out"), asst("a0", "done")}
	tl := newTailer("next", old...)
	// Same content, new native ids (gemini's $set.messages), then the turn.
	re := []transcript.Message{user("U0", "q"), call("C0", "x"), result("R0", "x", "out"), asst("A0", "done"), user("u1", "next"), asst("a1", "answer")}
	eq(t, collect(tl, re, true), "a1")

	// A tool result re-expressed differently keeps the count: position wins.
	tl = newTailer("next", old...)
	re[2] = result("R0", "x", "out (re-expressed)")
	eq(t, collect(tl, re, true), "a1")
}

func TestTailerSkipsTruncatedRead(t *testing.T) {
	old := []transcript.Message{user("u0", "q"), asst("a0", "done")}
	tl := newTailer("next", old...)
	eq(t, collect(tl, []transcript.Message{user("x", "half")}, false)) // mid-rewrite
	eq(t, collect(tl, append(old, user("u1", "next"), call("c1", "y")), false), "c1")
}

func TestClassify(t *testing.T) {
	d := &driver{}
	for _, tc := range []struct {
		exit           int
		stdout, stderr string
		want           string
	}{
		{0, "fine", "", ""},
		{1, "Invalid API key · Please run /login", "", ReasonNotLoggedIn},
		{1, "", "API Error: 429 rate_limit_error", ReasonRateLimited},
		{1, "You've hit your session limit · resets 12:19pm (UTC)", "", ReasonRateLimited}, // claude 2.1 on a subscription limit
		{1, "You've hit your limit", "", ReasonRateLimited},
		{1, "", "No conversation found with session ID: x", ReasonNoSession},
		{1, "", "connect ECONNREFUSED 127.0.0.1:9 (connection refused)", ReasonFailed},
		{1, "", "the model refused to answer", ReasonRefused},
		{2, "", "boom", ReasonFailed},
		{1, "API Error: Claude Code is unable to respond to this request, which appears to violate our Usage Policy", "", ReasonRefused},
		// codex 0.171 on a message over 1,048,576 characters
		{1, "", `Error: turn/start: turn/start failed: Input exceeds the maximum length of 1048576 characters. (code -32602), data: {"input_error_code":"input_too_large"}`, ReasonRefused},
		// A JSON event's numbers are timings and counts, not statuses: claude's
		// result of a throttled turn that took 401 ms was read as a 401 (not
		// logged in), and a fleet account was never offered another.
		{1, `{"type":"result","is_error":true,"api_error_status":429,"duration_ms":401,"result":"API Error: Server is temporarily limiting requests (not your usage limit)"}`, "", ReasonRateLimited},
		{1, `{"type":"result","is_error":true,"duration_ms":429,"num_turns":401,"result":"boom"}`, "", ReasonFailed},
		{1, `{"error":{"code":401,"message":"request failed"}}`, "", ReasonNotLoggedIn},
		{1, `{"type":"error","message":"API Error: 401 {\"type\":\"authentication_error\"}"}`, "", ReasonNotLoggedIn},
	} {
		if got, detail := d.classify(tc.exit, 1, tc.stdout, tc.stderr); got != tc.want {
			t.Errorf("classify(%d, %q, %q) = %q (%s), want %q", tc.exit, tc.stdout, tc.stderr, got, detail, tc.want)
		}
	}
}

func TestClassifyQuietExit(t *testing.T) {
	d := &driver{}
	if r, _ := d.classify(0, 0, "", "[ERROR] The model response was blocked due to safety settings."); r != ReasonRefused {
		t.Errorf("gemini's blocked answer: %q", r)
	}
	if r, _ := d.classify(0, 0, "", "some warning"); r != "" {
		t.Errorf("a quiet turn: %q", r)
	}
	if r, _ := d.classify(0, 2, "", "[ERROR] The model response was blocked due to safety settings."); r != "" {
		t.Errorf("a turn with output: %q", r)
	}
}

// A CLI that leaves its transcript without the history it resumed (Gemini
// rewrote one to the turn's own entries in the delivery model test) still
// yields the turn's answer, once, and says the transcript is lost; before,
// the final read was taken for a file caught mid-rewrite and the answer
// never reached the neutral copy.
func TestTailerLostHistoryAtTheEnd(t *testing.T) {
	old := []transcript.Message{user("u0", "q"), asst("a0", "done"), user("u1", "q2"), asst("a1", "done2")}
	tests := []struct {
		name  string
		early []transcript.Message // read while the CLI ran, before the rewrite
		final []transcript.Message
		want  []string
	}{
		{"only the turn is left", nil, []transcript.Message{user("U", "next"), asst("A", "answer")}, []string{"A"}},
		{"part was emitted before the rewrite",
			append(append([]transcript.Message(nil), old...), user("u2", "next"), call("c2", "x"), result("r2", "x", "ok")),
			[]transcript.Message{user("U", "next"), call("C", "x"), result("R", "x", "ok"), asst("A", "answer")}, []string{"A"}},
		{"the prompt is not there", nil, []transcript.Message{asst("A", "answer")}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := newTailer("next", old...)
			var got []string
			if tc.early != nil {
				collect(tl, tc.early, false)
			}
			got = append(got, collect(tl, tc.final, true)...)
			eq(t, got, tc.want...)
			if !tl.lost {
				t.Fatal("the lost history is not reported")
			}
		})
	}
	// A rewrite that keeps the history is not a loss.
	tl := newTailer("next", old...)
	collect(tl, append(append([]transcript.Message(nil), old...), user("u2", "next"), asst("a2", "answer")), true)
	if tl.lost {
		t.Fatal("an intact transcript reported lost")
	}
}

// A CLI that compacts its history when the turn starts (Claude Code's
// /compact, or its compaction of a long conversation before the prompt)
// writes the summary before the turn's prompt record: the summary is the
// turn's, and the prompt is still the prompt, not a second copy of the
// user's message.
func TestTailerPromptAfterCompactionSummary(t *testing.T) {
	old := []transcript.Message{user("u0", "earlier"), asst("a0", "earlier answer")}
	tl := newTailer("/compact", old...)
	summary := transcript.Message{Kind: transcript.KindNotice, NoticeType: transcript.NoticeCompactionSummary, Text: "the summary", NativeID: "s1"}
	msgs := append(append([]transcript.Message(nil), old...), summary,
		user("u1", "<command-name>/compact</command-name>\n<command-message>compact</command-message>\n<command-args></command-args>"), asst("a1", "answer"))
	eq(t, collect(tl, msgs, true), "s1", "a1")
	if tl.state != promptFound {
		t.Fatal("prompt not recognised after the compaction summary")
	}
}

// A CLI may write the turn's prompt into its file again later in the same
// turn (after a tool call, or when it rewrites the session, as Gemini
// does on resume): that is still the turn's prompt, which the thread has
// already, not a new user message; it was stored as a second copy of the
// prompt. A user message of other text is the CLI's own and is synced,
// and so is the prompt's text once such a message has begun another turn.
func TestTailerPromptWrittenAgainInTheTurn(t *testing.T) {
	old := []transcript.Message{user("u0", "earlier"), asst("a0", "earlier answer")}
	turn := func(msgs ...transcript.Message) []transcript.Message {
		return append(append([]transcript.Message(nil), old...), msgs...)
	}
	tests := []struct {
		name  string
		reads [][]transcript.Message // successive reads, the last one final
		want  []string
	}{
		{"again after a tool call", [][]transcript.Message{
			turn(user("u1", "do it"), call("c1", "x"), result("r1", "x", "ok"), user("u1b", "do it"), asst("a1", "done")),
		}, []string{"c1", "r1", "a1"}},
		{"again in a later read", [][]transcript.Message{
			turn(user("u1", "do it"), call("c1", "x")),
			turn(user("u1", "do it"), call("c1", "x"), result("r1", "x", "ok"), user("u1b", "  do it\n"), asst("a1", "done")),
		}, []string{"c1", "r1", "a1"}},
		{"again after the answer, the session rewritten", [][]transcript.Message{
			turn(user("u1", "do it"), asst("a1", "done")),
			turn(user("U0", "earlier"), asst("A0", "earlier answer"), user("U1", "do it"), asst("A1", "done"), user("u1b", "do it")),
		}, []string{"A1"}},
		{"a user message of other text", [][]transcript.Message{
			turn(user("u1", "do it"), call("c1", "x"), result("r1", "x", "ok"), user("u2", "do it and more"), asst("a1", "done")),
		}, []string{"c1", "r1", "u2", "a1"}},
		{"the prompt's text in a later turn", [][]transcript.Message{
			turn(user("u1", "do it"), asst("a1", "done"), user("u2", "something else"), asst("a2", "ok"), user("u3", "do it"), asst("a3", "again")),
		}, []string{"a1", "u2", "a2", "u3", "a3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := newTailer("do it", old...)
			readAll(t, tl, tc.reads, tc.want...)
		})
	}
}

// A CLI may rewrite its session in the middle of a turn to fewer entries
// than the turn found (Gemini's $set of its history: compressing the
// older entries into a summary, or down to the turn's own entries) and
// then go on appending the turn's. Every entry of the turn is emitted
// once and no history again; the tailer counted entries there and skipped
// as many of the turn's first entries as the file had lost.
func TestTailerHistoryShrinksThenTurnGrows(t *testing.T) {
	h := []transcript.Message{user("u0", "q0"), asst("a0", "r0"), user("u1", "q1"), call("c0", "w"), result("r0", "w", "out"), asst("a1", "r1")}
	p := user("P", "do it")
	sum, ack := user("S", "summary of the conversation"), asst("K", "Got it.")
	c1, r1, c2, r2, c3, r3, a := call("c1", "x"), result("r1", "x", "ok"), call("c2", "y"), result("r2", "y", "ok"), call("c3", "z"), result("r3", "z", "ok"), asst("A", "answer")
	seq := func(parts ...any) []transcript.Message {
		var out []transcript.Message
		for _, x := range parts {
			switch v := x.(type) {
			case transcript.Message:
				out = append(out, v)
			case []transcript.Message:
				out = append(out, v...)
			}
		}
		return out
	}
	tests := []struct {
		name  string
		reads [][]transcript.Message // successive reads, the last one final
		want  []string
		lost  bool
		old   []transcript.Message // the history, when not h
	}{
		{"the oldest entries dropped", [][]transcript.Message{
			seq(h[2:]),
			seq(h[2:], p, c1),
			seq(h[2:], p, c1, r1, a),
		}, []string{"c1", "r1", "A"}, true, nil},
		{"a summary in place of the history, before the prompt", [][]transcript.Message{
			seq(sum, ack, h[4:]),
			seq(sum, ack, h[4:], p, c1, r1, a),
		}, []string{"c1", "r1", "A"}, true, nil},
		{"down to the turn's own entries", [][]transcript.Message{
			seq(p, c1),
			seq(p, c1, r1, c2, r2, c3, r3),
			seq(p, c1, r1, c2, r2, c3, r3, a),
		}, []string{"c1", "r1", "c2", "r2", "c3", "r3", "A"}, true, nil},
		{"down to the turn's own entries after some were emitted", [][]transcript.Message{
			seq(h, p, c1),
			seq(p, c1, r1, c2),
			seq(p, c1, r1, c2, r2, c3, r3, a),
		}, []string{"c1", "r1", "c2", "r2", "c3", "r3", "A"}, true, nil},
		{"a summary of the history and part of the turn", [][]transcript.Message{
			seq(h, p, c1, r1),
			seq(sum, ack, r1, c2, r2, c3, r3, a),
		}, []string{"c1", "r1", "c2", "r2", "c3", "r3", "A"}, true, nil},
		{"a summary of the history and the newest output truncated", [][]transcript.Message{
			seq(h, p, c1, result("r1", "x", "a long output")),
			seq(sum, ack, c1, result("R1", "x", "a long..."), c2, r2, a),
		}, []string{"c1", "r1", "c2", "r2", "A"}, true, nil},
		{"the newest history entries dropped", [][]transcript.Message{
			seq(h[:3], p, c1, r1, c2, a),
		}, []string{"c1", "r1", "c2", "A"}, true, nil},
		{"the newest history entry re-expressed", [][]transcript.Message{
			seq(h[:5], asst("A1", "r1, reworded"), p, c1, r1, a),
		}, []string{"c1", "r1", "A"}, false, nil},
		{"down to the turn's own entries, its answer the history's newest", [][]transcript.Message{
			seq(p, c1, r1, asst("A", "r1")),
		}, []string{"c1", "r1", "A"}, true, nil},
		{"a summary that holds the prompt's text", [][]transcript.Message{
			seq(user("S", "the user said: do it, and more"), ack, h[4:], p, c1, r1, a),
		}, []string{"c1", "r1", "A"}, true, nil},
		{"a summary that holds the prompt's text, nothing else kept", [][]transcript.Message{
			seq(user("S", "the user said: do it, and more"), ack, p, c1, r1, a),
		}, []string{"c1", "r1", "A"}, true, nil},
		{"history with the prompt's text re-expressed in place", [][]transcript.Message{
			seq(user("U0", "do it"), h[1:4], result("R0", "w", "out (masked)"), h[5], p, c1, r1, a),
		}, []string{"c1", "r1", "A"}, false, seq(user("u0", "do it"), h[1:])},
		{"an entry written before the prompt's record", [][]transcript.Message{
			seq(h[:4], result("R0", "w", "out (masked)"), h[5], asst("Z", "closing"), p, c1, a),
		}, []string{"Z", "c1", "A"}, false, nil},
		{"a result of a history call put among the history", [][]transcript.Message{
			seq(h[:4], result("R0", "w", "cancelled"), h[5], p, c1, r1, a),
		}, []string{"c1", "r1", "A"}, false, seq(h[:4], h[5])},
		{"history re-expressed in place", [][]transcript.Message{
			seq(h[:4], result("R0", "w", "out (masked)"), h[5], p, c1),
			seq(h[:4], result("R0", "w", "out (masked)"), h[5], p, c1, r1, a),
		}, []string{"c1", "r1", "A"}, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := tc.old
			if old == nil {
				old = h
			}
			tl := newTailer("do it", old...)
			readAll(t, tl, tc.reads, tc.want...)
			if tl.lost != tc.lost {
				t.Fatalf("lost %v, want %v", tl.lost, tc.lost)
			}
		})
	}
}

// A prompt in Claude Code's own markup (a user pasting a command's output,
// or a command record's tags) is the turn's prompt: Claude Code records it
// as typed, and its reader reads such a record as a command_output notice
// or as the command "/name args", which did not match the prompt's text,
// so the tailer stored it as a new message (the thread showed the prompt
// twice, and an agent switched to next got it twice in its request).
func TestTailerPromptInClaudeMarkup(t *testing.T) {
	for _, prompt := range []string{
		"<local-command-stdout>pasted log</local-command-stdout>",
		"<command-name>/review</command-name>\n<command-message>review</command-message>\n<command-args>the parser</command-args>",
	} {
		t.Run(prompt[:20], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.jsonl")
			var lines []string
			for i, rec := range []map[string]any{
				{"type": "user", "uuid": "u0", "message": map[string]any{"role": "user", "content": "earlier"}},
				{"type": "assistant", "uuid": "a0", "message": map[string]any{"role": "assistant", "model": "m", "content": []any{map[string]any{"type": "text", "text": "earlier answer"}}}},
				{"type": "user", "uuid": "u1", "message": map[string]any{"role": "user", "content": prompt}},
				{"type": "assistant", "uuid": "a1", "message": map[string]any{"role": "assistant", "model": "m", "content": []any{map[string]any{"type": "text", "text": "done"}}}},
			} {
				rec["parentUuid"], rec["timestamp"] = nil, "2026-12-06T14:08:3"+fmt.Sprint(i)+".000Z"
				b, _ := json.Marshal(rec)
				lines = append(lines, string(b))
			}
			if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			msgs, err := claude.Reader{}.Read(path)
			if err != nil || len(msgs) != 4 {
				t.Fatalf("read %d messages (%v)", len(msgs), err)
			}
			tl := newTailer(prompt, msgs[:2]...)
			tl.reader = claude.Reader{}
			eq(t, collect(tl, msgs, true), "a1")
			if tl.state != promptFound {
				t.Fatalf("prompt state %v, want found", tl.state)
			}
		})
	}
}
