package gemini

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/msgspool"
	"github.com/cast-dev/cast/internal/transcript"
)

// peakSource is a MessageSource that notes the live heap every few
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

// sliceWriter is the writer as restore used it before it streamed: it
// gets the whole session as a slice (WriteFrom reads the spool into one).
type sliceWriter struct{ w Writer }

func (s sliceWriter) Write(t agents.Target, msgs []transcript.Message) (agents.Written, error) {
	return s.w.Write(t, msgs)
}

// bigSpool spools a long tool-using session of about size bytes: turns of
// a user's request, a call, its result and an answer.
func bigSpool(t *testing.T, size int) (*msgspool.Spool, int64) {
	t.Helper()
	sp := agenttest.Spool(t, nil)
	const unit = 16 << 10
	pad := strings.Repeat("x", unit)
	var total int64
	for i := 0; total < int64(size); i++ {
		id := fmt.Sprintf("call-%d", i)
		for _, m := range []transcript.Message{
			user(fmt.Sprintf("%d please %s", i, pad[:unit/2])),
			call(id, "run_shell_command", fmt.Sprintf(`{"command":"cat f%d"}`, i)),
			result(id, fmt.Sprintf("%d %s", i, pad), false),
			asst(fmt.Sprintf("%d done %s", i, pad[:unit/4])),
		} {
			if err := sp.Add(m); err != nil {
				t.Fatal(err)
			}
		}
		total += unit * 7 / 4
	}
	return sp, total
}

// Writing a large session from a spool holds about a record, not the
// session: the live heap at the points the writer reads a message grows
// by much less than the session. The same measure of the path restore
// took before (the session read into a slice for Write) holds it all:
// the check can fail.
func TestWriteStreamHoldsARecordNotTheSession(t *testing.T) {
	sp, size := bigSpool(t, 48<<20)
	limit := size / 4
	for _, tc := range []struct {
		name      string
		w         agents.Writer
		overLimit bool
	}{
		{"streamed", Writer{}, false},
		{"as a slice (before)", sliceWriter{Writer{}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &peakSource{MessageSource: sp}
			runtime.GC()
			base := heapObjects()
			out, err := agents.WriteFrom(tc.w, target(t), src)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(out.Path)
			if err != nil {
				t.Fatal(err)
			}
			grew := int64(src.peak) - int64(base)
			t.Logf("session %d MiB, file %d MiB, live heap at the reads at most %d MiB over the start (limit %d MiB)", size>>20, fi.Size()>>20, grew>>20, limit>>20)
			if over := grew > limit; over != tc.overLimit {
				t.Fatalf("the live heap grew by %d MiB while writing a %d MiB session (limit %d MiB); over the limit: %v, want %v", grew>>20, size>>20, limit>>20, over, tc.overLimit)
			}
		})
	}
}
