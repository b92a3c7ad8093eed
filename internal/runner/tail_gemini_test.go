package runner

import (
	"os"
	"path/filepath"
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
