package pi

import (
	"flag"
	"fmt"
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

// sameBytesInputs are the corpus files, a session with every kind of
// message the writer places (results moved up to their calls, orphans
// both ways, a repeated call id, images, exit codes, notices, times and
// models), 1,400 messages whose entry ids collide under the pinned
// session id, and nothing at all.
func sameBytesInputs(t *testing.T) map[string][]transcript.Message {
	in := map[string][]transcript.Message{}
	files, _ := filepath.Glob("testdata/*.jsonl")
	for _, f := range files {
		msgs, err := Reader{}.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		in[f] = msgs
	}
	png := []transcript.Image{{MediaType: "image/png", Data: []byte("\x89PNG\r\n\x1a\nnot really")}}
	at := time.Date(2025, 7, 1, 9, 30, 0, 123e6, time.UTC)
	exit := int32(3)
	withExit := result("c2", "failed", true)
	withExit.ToolResult.ExitCode = &exit
	withImage := result("c1", "read", false)
	withImage.Images = png
	in["every kind"] = []transcript.Message{
		{Kind: transcript.KindUser, Text: "look <b>&</b>", Images: png, Time: at},
		{Kind: transcript.KindThinking, Text: "plan", Agent: "claude", Model: "claude-x", Time: at.Add(time.Second)},
		{Kind: transcript.KindAssistant, Text: "reading", Agent: "claude", Model: "claude-x"},
		call("c1", "read", `{"path":"x.png"}`), call("c2", "bash", `{"command":"false"}`),
		user("meanwhile"), withImage, withExit,
		call("c1", "read", `{"path":"again"}`), result("c1", "repeated id", false),
		call("c3", "mcp.fs:ls", `["a"]`), call("c4", "run", "not json"), result("c4", "ok", false),
		result("zz", "orphan", true),
		{Kind: transcript.KindNotice, NoticeType: transcript.NoticeCompactionSummary, Text: "so far", Time: at.Add(time.Hour)},
		{Kind: transcript.KindNotice, NoticeType: transcript.NoticeMerge, Text: "merged"},
		{Kind: transcript.KindInternal, Text: "secret"},
		{Kind: transcript.KindAssistant, Text: "from gemini", Agent: "gemini", Model: "gemini-2.5-pro"},
		asst(""), user(""),
	}
	var long []transcript.Message
	for i := range 1400 {
		m := user(fmt.Sprintf("question %d", i))
		if i%2 == 1 {
			m = asst(fmt.Sprintf("answer %d", i))
		}
		long = append(long, m)
	}
	in["1,400 messages, entry ids colliding"] = long
	in["nothing"] = nil
	return in
}

var _ agents.StreamWriter = Writer{} // restore streams into it

// TestWriterSameBytes pins the bytes the writer writes for each input.
func TestWriterSameBytes(t *testing.T) {
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	newTarget := func() agents.Target {
		return agents.Target{Home: filepath.Join(t.TempDir(), "agent"), Cwd: "/nowhere/My Project", NativeID: "collide-7561", Model: "fake/fake-model"}
	}
	agenttest.SameBytes(t, Writer{Now: func() time.Time { return fixed }}, newTarget, sameBytesInputs(t), writtenPins, *updateWritten)
}
