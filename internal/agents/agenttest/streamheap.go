package agenttest

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// WriteStreamHoldsARecord checks that w, a StreamWriter, writes a long
// tool-using session of about 48 MiB from a spool holding about a record,
// not the session: the live heap, noted every 64 messages the writer
// reads, grows by less than a quarter of the session. The same measure
// of the path restore took before (the session read into a slice for
// Write) must hold it all, or the check could not fail.
func WriteStreamHoldsARecord(t *testing.T, w agents.Writer, newTarget func() agents.Target) {
	t.Helper()
	if _, ok := w.(agents.StreamWriter); !ok {
		t.Fatalf("%T is no agents.StreamWriter", w)
	}
	sp, size := bigSpool(t, 48<<20)
	limit := size / 4
	for _, tc := range []struct {
		name      string
		w         agents.Writer
		overLimit bool
	}{
		{"streamed", w, false},
		{"as a slice (before)", onlyWrite{w}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &peakSource{MessageSource: sp}
			runtime.GC()
			base := heapObjects()
			if _, err := agents.WriteFrom(tc.w, newTarget(), src); err != nil {
				t.Fatal(err)
			}
			grew := int64(src.peak) - int64(base)
			t.Logf("session %d MiB, live heap at the reads at most %d MiB over the start (limit %d MiB)", size>>20, grew>>20, limit>>20)
			if over := grew > limit; over != tc.overLimit {
				t.Fatalf("the live heap grew by %d MiB while writing a %d MiB session (limit %d MiB); over the limit: %v, want %v", grew>>20, size>>20, limit>>20, over, tc.overLimit)
			}
		})
	}
}

// onlyWrite is a writer as restore used it before it streamed: its
// StreamWriter hidden, WriteFrom reads the spool into a slice for Write.
type onlyWrite struct{ agents.Writer }

// peakSource is a MessageSource that notes the live heap every 64
// messages the writer reads from it: a writer holding the session (as a
// slice, or as its records) holds it at those points.
type peakSource struct {
	agents.MessageSource
	reads int
	peak  uint64
}

func (p *peakSource) note() {
	if p.reads++; p.reads%64 == 0 {
		runtime.GC()
		p.peak = max(p.peak, heapObjects())
	}
}

func (p *peakSource) Each(each func(pos int64, m *transcript.Message) error) error {
	return p.MessageSource.Each(func(pos int64, m *transcript.Message) error {
		p.note()
		return each(pos, m)
	})
}

func (p *peakSource) At(pos int64) (transcript.Message, error) {
	p.note()
	return p.MessageSource.At(pos)
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// bigSpool spools turns of a user's request, a call, its result and an
// answer until they hold about size bytes of text, which it returns.
func bigSpool(t *testing.T, size int) (agents.MessageSource, int64) {
	t.Helper()
	sp := Spool(t, nil)
	const unit = 16 << 10
	pad := strings.Repeat("x", unit)
	var total int64
	for i := 0; total < int64(size); i++ {
		id := fmt.Sprintf("call-%d", i)
		for _, m := range []transcript.Message{
			{Kind: transcript.KindUser, Text: fmt.Sprintf("%d please %s", i, pad[:unit/2])},
			{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: id, Name: "run_shell_command", Input: fmt.Sprintf(`{"command":"cat f%d"}`, i)}},
			{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: fmt.Sprintf("%d %s", i, pad)}},
			{Kind: transcript.KindAssistant, Text: fmt.Sprintf("%d done %s", i, pad[:unit/4])},
		} {
			if err := sp.Add(m); err != nil {
				t.Fatal(err)
			}
		}
		total += unit * 7 / 4
	}
	return sp, total
}
