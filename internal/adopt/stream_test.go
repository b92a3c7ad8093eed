package adopt_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/adopt"
	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/exportlog"
	"github.com/cast-dev/cast/internal/transcript"
)

const geminiID = "8e7d6c5b-0000-4281-b7c6-d5e4f3a2b1c0"

// geminiHead is a Gemini session's header line; at varies it as a
// rewrite of the file would.
func geminiHead(at string) string {
	return `{"sessionId":"` + geminiID + `","projectHash":"h","startTime":"2026-11-30T10:00:00.000Z","lastUpdated":"` + at + `","kind":"main"}` + "\n"
}

// geminiLine is one Gemini record: even i a user message, odd an answer.
func geminiLine(i int, text string) string {
	t, _ := json.Marshal(text)
	if i%2 == 0 {
		return fmt.Sprintf(`{"id":"m%d","timestamp":"2026-11-30T10:00:01.000Z","type":"user","content":[{"text":%s}]}`+"\n", i, t)
	}
	return fmt.Sprintf(`{"id":"m%d","timestamp":"2026-11-30T10:00:01.000Z","type":"gemini","content":%s,"model":"gemini-3"}`+"\n", i, t)
}

func newGeminiRig(t *testing.T) *rig {
	r := newRig(t)
	r.agent = "gemini"
	r.file = filepath.Join(r.home, "tmp", "w", "chats", "session-2026-11-30T10-00-"+geminiID[:8]+".jsonl")
	if err := os.MkdirAll(filepath.Dir(r.file), 0o700); err != nil {
		t.Fatal(err)
	}
	return r
}

// readTexts are the texts of the file as the agent's reader reads it.
func (r *rig) readTexts() []string {
	r.t.Helper()
	rd, err := agents.ReaderFor(r.agent)
	if err != nil {
		r.t.Fatal(err)
	}
	msgs, err := rd.Read(r.file)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, m.Text)
	}
	return out
}

// A Gemini file (read whole at each change, a message at a time:
// agents.StreamReader) is sent as its reader reads it, in batches, each
// message once and in order, as it grows, waits on a half-written line,
// is rewritten or cut short; what the file gains while a scan sends is
// the next scan's; a file cast wrote is its cast session's.
func TestFollowGeminiReadsEach(t *testing.T) {
	rd, err := agents.ReaderFor("gemini")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rd.(agents.StreamReader); !ok {
		t.Fatal("gemini's reader is no agents.StreamReader: this test would not test the streaming path")
	}
	r := newGeminiRig(t)
	var lines []string
	var texts []string
	for i := range 1200 {
		texts = append(texts, fmt.Sprintf("message %d", i))
		lines = append(lines, geminiLine(i, texts[i]))
	}
	r.write(append([]string{geminiHead("a")}, lines...)...)
	want(t, "import", r.scan(), texts...)
	want(t, "import as read", r.sink.texts(0), r.readTexts()...)
	if b := r.sink.batches[0]; len(r.sink.batches) < 3 || b.SessionID != "" || b.NativeID != geminiID || b.History != 1200 || b.Title != "message 0" {
		t.Fatalf("%d batches, the first %+v", len(r.sink.batches), b)
	}
	want(t, "unchanged", r.scan())

	half := geminiLine(1200, "more")
	r.append(half[:20])
	want(t, "half a line", r.scan())
	r.append(half[20:] + geminiLine(1201, "sure"))
	want(t, "grown", r.scan(), "more", "sure")
	if last := r.sink.batches[len(r.sink.batches)-1]; last.SessionID != "cast-"+geminiID {
		t.Fatalf("growth went to session %q", last.SessionID)
	}
	r.append(geminiLine(1202, "message 0"))
	want(t, "repeated text", r.scan(), "message 0")

	// Rewritten: another header, the records re-encoded (answers as
	// parts), a $set, and one more record.
	lines = append(lines, geminiLine(1200, "more"), geminiLine(1201, "sure"), geminiLine(1202, "message 0"))
	again := []string{geminiHead("b")}
	for _, l := range lines {
		again = append(again, strings.Replace(l, `"model":"gemini-3"`, `"model":"gemini-3-pro"`, 1))
	}
	again = append(again, `{"$set":{"lastUpdated":"c"}}`+"\n", geminiLine(1204, "after the rewrite"))
	r.write(again...)
	want(t, "rewritten", r.scan(), "after the rewrite")
	r.write(geminiHead("d"), lines[0], lines[1])
	want(t, "cut short", r.scan())
	r.append(geminiLine(1205, "after the cut"))
	want(t, "grown after the cut", r.scan(), "after the cut")

	// What the file gains while the scan sends waits for the next scan.
	r.sink.during = func() { r.append(geminiLine(1207, "late")) }
	r.append(geminiLine(1206, "on time"))
	want(t, "grown during the scan", r.scan(), "on time")
	want(t, "the next scan", r.scan(), "late")

	// Restored by cast (its writer words it otherwise), then resumed.
	if err := os.Remove(r.file); err != nil {
		t.Fatal(err)
	}
	want(t, "deleted", r.scan())
	r.write(geminiHead("e"), strings.Replace(lines[0], `"type":"user"`, `"type":"user","displayContent":"x"`, 1), lines[1])
	sum, err := exportlog.FileSHA256(r.file)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(r.file)
	r.cast.wrote[r.file] = exportlog.Record{NativeID: geminiID, Path: r.file, SHA256: sum, SessionID: "s-restored", Size: fi.Size()}
	r.append(geminiLine(1300, "resumed"))
	from := len(r.sink.batches)
	want(t, "restored and resumed", r.scan(), "resumed")
	if got := r.sink.batches[from].SessionID; got != "s-restored" {
		t.Fatalf("growth of a restored file went to %q", got)
	}
	want(t, "unchanged after the restore", r.scan())
}

// heapLive is the Go heap's live objects after a collection.
func heapLive() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// peakSink counts what it is sent and notes the live heap at each call:
// a follower holding the file or all its messages before it sends holds
// them there.
type peakSink struct {
	n    int
	peak uint64
}

func (s *peakSink) Adopt(_ context.Context, b adopt.Batch) (string, error) {
	s.n += len(b.Messages)
	s.peak = max(s.peak, heapLive())
	return "cast-" + b.NativeID, nil
}

func (s *peakSink) MaxMessageBytes() int { return 0 }
func (s *peakSink) MaxBatchBytes() int   { return 0 }

// Adopting a large Gemini file holds about a batch, not the file nor all
// its messages: the live heap while it sends grows by much less than
// the file.
func TestFollowGeminiHoldsABatchNotTheFile(t *testing.T) {
	r := newGeminiRig(t)
	f, err := os.Create(r.file)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	// 2,000 messages of 16 KiB: a 31 MiB file, nearly eight batches of
	// 4 MiB, so a follower holding a batch (5.5 MiB live at the sink,
	// measured) stays under the limit of a quarter of the file (7.9 MiB)
	// and one holding the file is far over it (67 MiB); the race-run
	// parse costs by the byte.
	const msgs, size = 2000, 16 << 10
	_, _ = w.WriteString(geminiHead("a"))
	for i := range msgs {
		_, _ = w.WriteString(geminiLine(i, fmt.Sprintf("%d %s", i, strings.Repeat("x", size))))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(r.file)
	if err != nil {
		t.Fatal(err)
	}
	s := &peakSink{}
	fl, err := adopt.New([]adopt.Source{{Agent: "gemini", Home: r.home}}, r.state, s, r.cast, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	base := heapLive()
	if _, err := fl.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.n != msgs {
		t.Fatalf("sent %d messages, want %d", s.n, msgs)
	}
	grew, limit := int64(s.peak)-int64(base), fi.Size()/4
	t.Logf("file %d MiB, live heap at the sink at most %d MiB over the start (limit %d MiB)", fi.Size()>>20, grew>>20, limit>>20)
	if grew > limit {
		t.Fatalf("the live heap grew by %d MiB while sending a %d MiB file: the follower holds the file or its messages", grew>>20, fi.Size()>>20)
	}
}

// Gemini CLI compresses a long history: it writes its session anew as a
// summary (a user record it answers itself with "Got it. Thanks for the
// additional context!") and the newest entries, which the adopted session
// holds already. The summary is sent once, as the compaction summary
// notice, holding the user's messages Gemini kept after it: the session
// holds them before the notice, and a switch's rebuild starts at the
// notice (transcript.SinceCompaction), so without them there a switch
// after the compression lost them.
func TestFollowGeminiCompression(t *testing.T) {
	const snapshot = "<state_snapshot>q0 and a0</state_snapshot>"
	r := newGeminiRig(t)
	history := geminiLine(0, "q0") + geminiLine(1, "a0") + geminiLine(2, "q2") + geminiLine(3, "a2")
	r.write(geminiHead("a"), history)
	want(t, "import", r.scan(), "q0", "a0", "q2", "a2")
	set := func(lines ...string) string {
		return `{"$set":{"messages":[` + strings.TrimSuffix(strings.Join(lines, ","), "\n") + `]}}` + "\n"
	}
	summary, _ := json.Marshal(snapshot)
	r.write(geminiHead("b"), history, set(`{"id":"s","type":"user","content":[{"text":`+string(summary)+`}]}`,
		`{"id":"k","type":"gemini","content":[{"text":"Got it. Thanks for the additional context!"}]}`,
		strings.TrimSuffix(geminiLine(2, "q2"), "\n"), strings.TrimSuffix(geminiLine(3, "a2"), "\n")), geminiLine(4, "q4"))
	want(t, "compressed", r.scan(), transcript.WithKept(snapshot, []string{"q2"}), "q4")
	r.append(geminiLine(5, "a4"))
	want(t, "after", r.scan(), "a4")
}
