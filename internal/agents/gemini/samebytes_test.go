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

var updateWritten = flag.Bool("update-written", false, "rewrite "+agenttest.WrittenPins+" from the writer's output")

// sameBytesInputs are the writer's test inputs: the round trips, both
// corpus files, and what those leave out (images, a compaction summary,
// times and models, nothing at all).
func sameBytesInputs(t *testing.T) map[string][]transcript.Message {
	in := map[string][]transcript.Message{}
	for _, rt := range roundTrips {
		in[rt.Name] = rt.In
	}
	agenttest.ReadInto(t, in, Reader{}.Read, "testdata/gemini.jsonl", "testdata/test_conversation_gemini.json")
	png, at := agenttest.FakePNG, agenttest.PinnedAt
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
	newTarget := func() agents.Target {
		return agents.Target{Home: filepath.Join(t.TempDir(), ".gemini"), Cwd: "/nowhere/My Project", SessionID: "sess-1", Model: "gemini-2.5-flash"}
	}
	agenttest.PinWritten(t, Writer{Now: agenttest.FixedNow}, newTarget, sameBytesInputs(t), *updateWritten)
}
