package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/gemini"
	"github.com/cast-dev/cast/internal/transcript"
)

// A Gemini session that ends with a tool result (its turn was interrupted
// after the tool ran) is closed by Gemini with a model turn of its own
// before the next prompt, which its next rewrite of the session ($set of
// its messages, as when it masks old tool outputs) writes out before the
// prompt's record. That came first in the turn, so the prompt was no
// longer looked for and was stored as a second user message.
func TestTailerGeminiPromptAfterInterruptedTurn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session-1.jsonl")
	history := `{"sessionId":"s1","projectHash":"x","kind":"main"}` + "\n" +
		`{"id":"a","type":"user","content":[{"text":"go"}]}` + "\n" +
		`{"id":"g","type":"gemini","content":"","toolCalls":[{"id":"c1","name":"ls","args":{},"result":[{"functionResponse":{"id":"c1","name":"ls","response":{"output":"a b"}}}],"status":"success"}]}` + "\n"
	if err := os.WriteFile(path, []byte(history), 0o600); err != nil {
		t.Fatal(err)
	}
	tl := &tailer{reader: gemini.Reader{}, path: path, prompt: "next", logf: t.Logf}
	tl.baseline()
	turn := history +
		`{"id":"p","type":"user","content":[{"text":"next"}]}` + "\n" +
		`{"$set":{"messages":[{"id":"a","type":"user","content":[{"text":"go"}]},` +
		`{"id":"g","type":"gemini","content":[{"functionCall":{"id":"c1","name":"ls","args":{}}}],"toolCalls":[{"id":"c1","name":"ls","args":{},"result":[{"functionResponse":{"id":"c1","name":"ls","response":{"output":"a b"}}}],"status":"success"}]},` +
		`{"id":"g_response","type":"user","content":[{"functionResponse":{"id":"c1","name":"ls","response":{"output":"a b"}}}]},` +
		`{"id":"z","type":"gemini","content":[{"text":"[The previous response was interrupted before it completed.]"}]},` +
		`{"id":"p","type":"user","content":[{"text":"next"}]}]}}` + "\n" +
		`{"id":"x","type":"gemini","content":"done"}` + "\n"
	if err := os.WriteFile(path, []byte(turn), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []string
	if !tl.poll(true, func(m transcript.Message) { got = append(got, m.NativeID) }) {
		t.Fatal("the session did not read")
	}
	eq(t, got, "x#text")
	if tl.state != promptFound {
		t.Fatalf("prompt state %v, want found", tl.state)
	}
}

// A model may answer with exactly the text of the turn Gemini makes up to
// close an interrupted one ("[The previous response was interrupted
// before it completed.]", a user asking it to repeat the marker, or a
// model echoing its history). Gemini records a real answer with the model
// that gave it, and makes its own closing turn only after a tool's
// response; the answer was left out with the closing turn and never
// reached the thread.
func TestTailerGeminiAnswerIsTheInterruptedPlaceholder(t *testing.T) {
	const placeholder = "[The previous response was interrupted before it completed.]"
	path := filepath.Join(t.TempDir(), "session-1.jsonl")
	history := `{"sessionId":"s1","projectHash":"x","kind":"main"}` + "\n" +
		`{"id":"a","type":"user","content":[{"text":"go"}]}` + "\n" +
		`{"id":"b","type":"gemini","content":"gone","model":"gemini-2.5-pro"}` + "\n"
	if err := os.WriteFile(path, []byte(history), 0o600); err != nil {
		t.Fatal(err)
	}
	tl := &tailer{reader: gemini.Reader{}, path: path, prompt: "say the marker", logf: t.Logf}
	tl.baseline()
	answer := `{"id":"x","timestamp":"2026-12-06T22:00:00.000Z","type":"gemini","content":"` + placeholder + `","thoughts":[],"model":"gemini-2.5-pro"}` + "\n"
	turn := history + `{"id":"p","type":"user","content":[{"text":"say the marker"}]}` + "\n" + answer
	var got []string
	emit := func(m transcript.Message) { got = append(got, m.NativeID+" "+m.Text) }
	if err := os.WriteFile(path, []byte(turn), 0o600); err != nil {
		t.Fatal(err)
	}
	if !tl.poll(false, emit) {
		t.Fatal("the session did not read")
	}
	// Then the CLI rewrites the session ($set of its history, as when it
	// masks old tool outputs): the answer keeps its model, its content
	// becomes a part list.
	turn += `{"$set":{"messages":[{"id":"a","type":"user","content":[{"text":"go"}]},` +
		`{"id":"b","type":"gemini","content":[{"text":"gone"}],"model":"gemini-2.5-pro"},` +
		`{"id":"p","type":"user","content":[{"text":"say the marker"}]},` +
		`{"id":"x","timestamp":"2026-12-06T22:00:00.000Z","type":"gemini","content":[{"text":"` + placeholder + `"}],"thoughts":[],"model":"gemini-2.5-pro"}]}}` + "\n"
	if err := os.WriteFile(path, []byte(turn), 0o600); err != nil {
		t.Fatal(err)
	}
	if !tl.poll(true, emit) {
		t.Fatal("the session did not read")
	}
	eq(t, got, "x#text "+placeholder)
}

// Records of a Gemini CLI session file, as the CLI writes them.
func gUser(id, text string) string {
	return `{"id":"` + id + `","type":"user","content":[{"text":"` + text + `"}]}`
}

func gAnswer(id, text string) string {
	return `{"id":"` + id + `","type":"gemini","content":"` + text + `","thoughts":[],"model":"gemini-2.5-pro"}`
}

// gTool is a model turn that called the shell (call id cid) and got out:
// as the CLI appends it, or (set) as its rewrite of the session has it,
// the call in the content and the response in a record of its own.
func gTool(id, cid, out string, set bool) string {
	call := `{"id":"` + cid + `","name":"run_shell_command","args":{"command":"ls"}`
	resp := `[{"functionResponse":{"id":"` + cid + `","name":"run_shell_command","response":{"output":"` + out + `"}}}]`
	tcs := `"toolCalls":[` + call + `,"result":` + resp + `,"status":"success"}]`
	if !set {
		return `{"id":"` + id + `","type":"gemini","content":"",` + tcs + `,"thoughts":[],"model":"gemini-2.5-pro"}`
	}
	return `{"id":"` + id + `","type":"gemini","content":[{"functionCall":` + call + `}}],` + tcs + `,"model":"gemini-2.5-pro"},` +
		`{"id":"` + id + `_response","type":"user","content":` + resp + `}`
}

// gSet is the CLI's rewrite of the session to recs.
func gSet(recs ...string) string { return `{"$set":{"messages":[` + strings.Join(recs, ",") + `]}}` }

// gFile is a session file of records, one a line.
func gFile(recs ...string) string {
	return `{"sessionId":"s1","projectHash":"x","kind":"main"}` + "\n" + strings.Join(recs, "\n") + "\n"
}

// tailGemini has a tailer follow a Gemini session that holds history
// when the turn starts and then each of reads in turn, the last read
// final, and returns the native ids it emitted.
func tailGemini(t *testing.T, prompt string, history []string, reads ...[]string) (*tailer, []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "session-1.jsonl")
	if err := os.WriteFile(path, []byte(gFile(history...)), 0o600); err != nil {
		t.Fatal(err)
	}
	tl := &tailer{reader: gemini.Reader{}, path: path, prompt: prompt, logf: t.Logf}
	tl.baseline()
	var got []string
	for i, recs := range reads {
		if err := os.WriteFile(path, []byte(gFile(recs...)), 0o600); err != nil {
			t.Fatal(err)
		}
		if !tl.poll(i == len(reads)-1, func(m transcript.Message) { got = append(got, m.NativeID) }) {
			t.Fatal("the session did not read")
		}
	}
	return tl, got
}

// The user sends a prompt an earlier message of the session holds
// already ("do it", "continue"), and the model ends the turn as it ended
// that one ("Done."). Gemini has been seen to rewrite a resumed session
// down to the turn's own entries; read first after that, the turn's
// prompt, its tool call and its answer were taken for the history's "do
// it" and "Done." with entries added between them, and nothing of the
// turn was synced.
func TestTailerGeminiPromptRepeatedHistoryDropped(t *testing.T) {
	history := []string{gUser("u0", "q0"), gAnswer("a0", "r0"), gUser("u1", "do it"), gAnswer("a1", "Done.")}
	turn := append(append([]string(nil), history...), gUser("p", "do it"), gTool("g1", "c1", "a b", false))
	dropped := []string{gSet(gUser("p", "do it"), gTool("g1", "c1", "a b", true)), gAnswer("x", "Done.")}
	tl, got := tailGemini(t, "do it", history, append(turn, dropped...))
	eq(t, got, "g1#call:c1", "g1#result:c1", "x#text")
	if tl.state != promptFound || !tl.lost {
		t.Fatalf("prompt state %v, lost %v; want found, lost", tl.state, tl.lost)
	}
}

// Gemini squeezes a long history mid-turn (its context management keeps
// the newest entries that fit and a summary of the rest; the kept part
// begins at a model turn, here the one whose tool response it is about to
// send) and the squeeze keeps none of what the tailer had seen, the
// prompt included. The turn's entries after it were not synced: with no
// entry it knew and no prompt in the file, the tailer took nothing from
// it.
func TestTailerGeminiSqueezeDropsPromptAndSeenEntries(t *testing.T) {
	history := []string{gUser("u0", "q0"), gAnswer("a0", "r0")}
	seen := append(append([]string(nil), history...), gUser("p", "do it"), gTool("g1", "c1", "one", false), gTool("g2", "c2", "two", false))
	squeezed := append(append([]string(nil), seen...), gTool("g3", "c3", "three", false),
		gSet(gUser("s", "### [System Note: Conversation History Truncated] the user asked for a listing; ran ls twice"), gTool("g3", "c3", "three", true)),
		gTool("g4", "c4", "four", false), gAnswer("x", "answer"))
	tl, got := tailGemini(t, "do it", history, seen, squeezed)
	eq(t, got, "g1#call:c1", "g1#result:c1", "g2#call:c2", "g2#result:c2", "g3#call:c3", "g3#result:c3", "g4#call:c4", "g4#result:c4", "x#text")
	if tl.state != promptFound {
		t.Fatalf("prompt state %v, want found", tl.state)
	}
}

// Gemini compresses a long history when a turn starts: it writes the
// session anew as a summary of the older entries (a user record, and its
// own "Got it." after it) and the newest ones it keeps. That is Gemini's
// session, whole for it; taken for one that lost its history, it was
// rebuilt from the neutral copy before the next turn, with all of the
// history again, which Gemini compressed again, at every turn after. A
// session rewritten down to the turn's own entries with no summary still
// lost its history. The summary is emitted once, before the turn's
// entries, holding the user's messages Gemini kept after it: they are
// before it in the neutral copy, and a switch's rebuild starts at the
// summary (transcript.SinceCompaction). Nothing else stored it, and a
// switch away after a compression sent the whole history.
func TestTailerGeminiCompressedHistoryIsNotLost(t *testing.T) {
	const snapshot = "<state_snapshot>the user asked q0 and q1; ran ls</state_snapshot>"
	history := []string{gUser("u0", "q0"), gAnswer("a0", "r0"), gUser("u9", "q9"), gAnswer("a9", "r9"), gUser("u1", "q1"), gTool("g0", "c0", "zero", false), gAnswer("a1", "r1")}
	summary := []string{gUser("s", snapshot),
		`{"id":"k","type":"gemini","content":[{"text":"Got it. Thanks for the additional context!"}]}`}
	turn := []string{gUser("p", "do it"), gTool("g1", "c1", "one", false), gAnswer("x", "answer")}
	for _, tc := range []struct {
		name string
		kept []string // what the rewrite keeps before the turn
		lost bool
		text string // the summary as emitted, "" for none
	}{
		{"a summary and the newest entries", append(append([]string(nil), summary...), gUser("u1", "q1"), gTool("g0", "c0", "zero", true), gAnswer("a1", "r1")), false,
			transcript.WithKept(snapshot, []string{"q1"})},
		{"a summary only", summary, false, snapshot},
		{"nothing", nil, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "session-1.jsonl")
			write := func(recs []string) {
				if err := os.WriteFile(path, []byte(gFile(recs...)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			write(history)
			tl := &tailer{reader: gemini.Reader{}, path: path, prompt: "do it", logf: t.Logf}
			tl.baseline()
			var got, summaries []string
			emit := func(m transcript.Message) {
				got = append(got, m.NativeID)
				if m.NoticeType == transcript.NoticeCompactionSummary {
					summaries = append(summaries, m.Text)
				}
			}
			rewritten := append(append([]string(nil), history...), gSet(tc.kept...))
			// The rewrite is read mid-turn, then again with the turn's
			// entries: the summary is emitted once.
			write(append(rewritten, turn[:2]...))
			if !tl.poll(false, emit) {
				t.Fatal("the session did not read")
			}
			write(append(rewritten, turn...))
			if !tl.poll(true, emit) {
				t.Fatal("the session did not read")
			}
			want := []string{"g1#call:c1", "g1#result:c1", "x#text"}
			if tc.text != "" {
				want = append([]string{"s"}, want...)
			}
			eq(t, got, want...)
			if tc.text != "" && (len(summaries) != 1 || summaries[0] != tc.text) {
				t.Fatalf("summaries emitted %q, want %q", summaries, tc.text)
			}
			if tl.lost != tc.lost {
				t.Fatalf("lost %v, want %v", tl.lost, tc.lost)
			}
		})
	}
}
