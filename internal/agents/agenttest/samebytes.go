package agenttest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/msgspool"
	"github.com/cast-dev/cast/internal/transcript"
)

// SameBytes pins the bytes w writes for each input: the sha256 of each
// file Write writes must be the one in pins (a "sum name" line each),
// and a writer that streams (agents.StreamWriter) must write the same
// from the messages spooled as `cast restore` spools an export. Each
// write goes to a fresh newTarget(). update rewrites pins from Write's
// files instead (done once, before a writer changes).
func SameBytes(t *testing.T, w agents.Writer, newTarget func() agents.Target, inputs map[string][]transcript.Message, pins string, update bool) {
	t.Helper()
	got := map[string]string{}
	sw, streams := w.(agents.StreamWriter)
	for name, msgs := range inputs {
		got[name] = writtenSum(t, name, func() (agents.Written, error) { return w.Write(newTarget(), msgs) })
		if !streams {
			continue
		}
		sp := Spool(t, msgs)
		if sum := writtenSum(t, name, func() (agents.Written, error) { return sw.WriteStream(newTarget(), sp) }); sum != got[name] {
			t.Errorf("%s: WriteStream from a spool wrote sha256 %s, Write %s", name, sum, got[name])
		}
	}
	if update {
		var b strings.Builder
		for _, name := range slices.Sorted(maps.Keys(got)) {
			b.WriteString(got[name] + " " + name + "\n")
		}
		if err := os.WriteFile(pins, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readPins(t, pins)
	if len(want) != len(got) {
		t.Errorf("%d pinned inputs, %d written", len(want), len(got))
	}
	for name, sum := range got {
		if want[name] != sum {
			t.Errorf("%s: wrote sha256 %s, pinned %s", name, sum, want[name])
		}
	}
}

// Spool is msgs spooled as `cast restore` spools an export; the test
// closes it.
func Spool(t testing.TB, msgs []transcript.Message) *msgspool.Spool {
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

func readPins(t *testing.T, pins string) map[string]string {
	f, err := os.Open(pins)
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

// WrittenPins is where a writer's TestWriterSameBytes keeps the sha256 of
// each file the writer wrote before it streamed (issue 27): the streaming
// writer must write the very same bytes.
const WrittenPins = "testdata/written.sha256"

// PinWritten is SameBytes against WrittenPins, for a writer whose Now is
// fixed (2026-01-02T03:04:05Z, FixedNow); update is the package's
// -update-written flag.
func PinWritten(t *testing.T, w agents.Writer, newTarget func() agents.Target, inputs map[string][]transcript.Message, update bool) {
	t.Helper()
	SameBytes(t, w, newTarget, inputs, WrittenPins, update)
}

// FixedNow is the clock of the writers whose bytes are pinned.
func FixedNow() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// Pinned inputs' shared pieces: an image that is not really one, and a
// time with milliseconds.
var (
	FakePNG  = []transcript.Image{{MediaType: "image/png", Data: []byte("\x89PNG\r\n\x1a\nnot really")}}
	PinnedAt = time.Date(2025, 7, 1, 9, 30, 0, 123e6, time.UTC)
)

// ReadInto reads each of files with read into in, under its name.
func ReadInto(t *testing.T, in map[string][]transcript.Message, read func(string) ([]transcript.Message, error), files ...string) {
	t.Helper()
	for _, f := range files {
		msgs, err := read(f)
		if err != nil {
			t.Fatal(err)
		}
		in[f] = msgs
	}
}
