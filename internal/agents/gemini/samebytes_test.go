package gemini

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/msgspool"
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
		in[rt.name] = rt.in
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

// TestWriterSameBytes pins the bytes the writer writes for each input,
// given the messages as a slice (Write) or spooled to a file as restore
// has them (WriteStream).
func TestWriterSameBytes(t *testing.T) {
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := Writer{Now: func() time.Time { return fixed }}
	got, streamed := map[string]string{}, map[string]string{}
	for name, msgs := range sameBytesInputs(t) {
		tg := agents.Target{Home: filepath.Join(t.TempDir(), ".gemini"), Cwd: "/nowhere/My Project", SessionID: "sess-1", Model: "gemini-2.5-flash"}
		got[name] = writtenSum(t, name, func() (agents.Written, error) { return w.Write(tg, msgs) })
		tg.Home = filepath.Join(t.TempDir(), ".gemini")
		sp := spool(t, msgs)
		streamed[name] = writtenSum(t, name, func() (agents.Written, error) { return w.WriteStream(tg, sp) })
	}
	for name, sum := range streamed {
		if got[name] != sum {
			t.Errorf("%s: WriteStream from a spool wrote sha256 %s, Write %s", name, sum, got[name])
		}
	}
	if *updateWritten {
		var b strings.Builder
		for _, name := range slices.Sorted(maps.Keys(got)) {
			b.WriteString(got[name] + " " + name + "\n")
		}
		if err := os.WriteFile(writtenPins, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readPins(t)
	if len(want) != len(got) {
		t.Errorf("%d pinned inputs, %d written", len(want), len(got))
	}
	for name, sum := range got {
		if want[name] != sum {
			t.Errorf("%s: wrote sha256 %s, pinned %s", name, sum, want[name])
		}
	}
}

// writtenSum is the sha256 of the file write wrote.
func writtenSum(t *testing.T, name string, write func() (agents.Written, error)) string {
	t.Helper()
	w, err := write()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	data, err := os.ReadFile(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// spool is msgs spooled as `cast restore` spools an export.
func spool(t *testing.T, msgs []transcript.Message) *msgspool.Spool {
	t.Helper()
	sp, err := msgspool.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	for _, m := range msgs {
		if err := sp.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	return sp
}

func readPins(t *testing.T) map[string]string {
	f, err := os.Open(writtenPins)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, _ := strings.Cut(sc.Text(), " ")
		out[name] = sum
	}
	return out
}
