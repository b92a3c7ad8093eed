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

var updateWritten = flag.Bool("update-written", false, "rewrite "+agenttest.WrittenPins+" from the writer's output")

// sameBytesInputs are the corpus files, a session with every kind of
// message the writer places (results moved up to their calls, orphans
// both ways, a repeated call id, images, exit codes, notices, times and
// models), 1,400 messages whose entry ids collide under the pinned
// session id, and nothing at all.
func sameBytesInputs(t *testing.T) map[string][]transcript.Message {
	in := map[string][]transcript.Message{}
	files, _ := filepath.Glob("testdata/*.jsonl")
	agenttest.ReadInto(t, in, Reader{}.Read, files...)
	png, at := agenttest.FakePNG, agenttest.PinnedAt
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
	newTarget := func() agents.Target {
		return agents.Target{Home: filepath.Join(t.TempDir(), "agent"), Cwd: "/nowhere/My Project", NativeID: "collide-7561", Model: "fake/fake-model"}
	}
	agenttest.PinWritten(t, Writer{Now: agenttest.FixedNow}, newTarget, sameBytesInputs(t), *updateWritten)
}
