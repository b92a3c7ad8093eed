package gemini

import (
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/transcript"
)

var updateWritten = flag.Bool("update-written", false, "rewrite testdata/written.sha256 from the writer's output")

// writtenPins is where TestWriterSameBytes keeps the sha256 of each file
// the writer wrote before it streamed (issue 27): the streaming writer
// must write the very same bytes.
const writtenPins = "testdata/written.sha256"

// sameBytesInputs are the writer's test inputs: the round trips, both
// corpus files, and what those leave out (images, a compaction summary,
// times and models, nothing at all).
func sameBytesInputs(t *testing.T) map[string][]transcript.Message {
	in := map[string][]transcript.Message{}
	for _, rt := range roundTrips {
		in[rt.Name] = rt.In
	}
	for _, f := range []string{"testdata/gemini.jsonl", "testdata/test_conversation_gemini.json"} {
		msgs, err := Reader{}.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		in[f] = msgs
	}
	png := []transcript.Image{{MediaType: "image/png", Data: []byte("\x89PNG\r\n\x1a\nnot really")}}
	at := time.Date(2025, 7, 1, 9, 30, 0, 123e6, time.UTC)
	in["images, summary, times and models"] = []transcript.Message{
		{Kind: transcript.KindUser, Text: "look", Images: png, Time: at},
		{Kind: transcript.KindAssistant, Text: "seen <b>&</b>", Agent: Agent, Model: "gemini-2.5-pro", Time: at.Add(time.Second)},
		{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: "c1", Name: "read_file", Input: `{"file_path":"x.png"}`}},
		{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "c1", Output: "read"}, Images: png},
		{Kind: transcript.KindNotice, NoticeType: transcript.NoticeCompactionSummary, Text: "we looked at x.png"},
		{Kind: transcript.KindAssistant, Text: "from claude", Agent: "claude", Model: "claude-x"},
	}
	in["nothing"] = nil
	return in
}

var _ agents.StreamWriter = Writer{} // restore streams into it

// TestWriterSameBytes pins the bytes the writer writes for each input,
// given the messages as a slice (Write) or spooled to a file as restore
// has them (WriteStream).
func TestWriterSameBytes(t *testing.T) {
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	newTarget := func() agents.Target {
		return agents.Target{Home: filepath.Join(t.TempDir(), ".gemini"), Cwd: "/nowhere/My Project", SessionID: "sess-1", Model: "gemini-2.5-flash"}
	}
	agenttest.SameBytes(t, Writer{Now: func() time.Time { return fixed }}, newTarget, sameBytesInputs(t), writtenPins, *updateWritten)
}
