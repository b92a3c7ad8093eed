package gemini

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// bigSessionEnv sets the size in MB of the session TestReadLargeSessionStreams
// generates (default 32; the session reported in the wild was 400).
const bigSessionEnv = "CAST_GEMINI_BIG_MB"

// writeRewrittenSession writes a JSONL session of about size bytes the way
// a long Gemini session grows: msgs messages, each answer rewritten again
// and again under its id as it streams, the last version the longest.
// It returns the final text of each message.
func writeRewrittenSession(t *testing.T, path string, size, msgs int) []string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	if err := enc.Encode(header{SessionID: "big-session", ProjectHash: "h", Kind: "main"}); err != nil {
		t.Fatal(err)
	}
	const chunk = 4 << 10
	rewrites := max(1, size/(msgs*chunk*4)) // the text grows chunk by chunk, so ~4 chunks a version on average
	final := make([]string, msgs)
	unit := strings.Repeat("x", chunk-16)
	for i := range msgs {
		typ := "user"
		if i%2 == 1 {
			typ = "gemini"
		}
		var text strings.Builder
		for k := range rewrites {
			fmt.Fprintf(&text, "[%d.%d]%s", i, k, unit[:min(len(unit), chunk*8/rewrites+1)])
			content, _ := json.Marshal(text.String())
			if err := enc.Encode(record{ID: "m" + strconv.Itoa(i), Type: typ, Content: content}); err != nil {
				t.Fatal(err)
			}
		}
		final[i] = text.String()
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return final
}

// heapSampler tracks the peak of live heap objects while it runs.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			if v := heapObjects(); v > h.peak.Load() {
				h.peak.Store(v)
			}
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) Stop() uint64 {
	close(h.stop)
	<-h.done
	if v := heapObjects(); v > h.peak.Load() {
		h.peak.Store(v)
	}
	return h.peak.Load()
}

// TestReadLargeSessionStreams imports a session file many times larger
// than the conversation it holds (answers rewritten as they stream) and
// checks the reader's peak heap stays a small fraction of the file: it
// must not hold the file, only the last version of each message. Set
// CAST_GEMINI_BIG_MB=400 for the size reported in the wild.
func TestReadLargeSessionStreams(t *testing.T) {
	size := 32 << 20
	if v := os.Getenv(bigSessionEnv); v != "" {
		mb, err := strconv.Atoi(v)
		if err != nil || mb <= 0 {
			t.Fatalf("%s=%q: want a size in MB", bigSessionEnv, v)
		}
		size = mb << 20
	}
	path := filepath.Join(t.TempDir(), "session-big.jsonl")
	const msgs = 40
	final := writeRewrittenSession(t, path, size, msgs)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var finalBytes int64
	for _, s := range final {
		finalBytes += int64(len(s))
	}

	// A low GOGC keeps garbage from hiding what is live.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	base := heapObjects()
	h := sampleHeap()
	got, _, err := Reader{}.ReadReport(path)
	peak := h.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != msgs {
		t.Fatalf("read %d messages, want %d", len(got), msgs)
	}
	for i, m := range got {
		if m.Text != final[i] {
			t.Fatalf("message %d is not the last version written (%d bytes, want %d)", i, len(m.Text), len(final[i]))
		}
	}
	grew := int64(peak) - int64(base)
	limit := fi.Size() / 4
	t.Logf("file %d MB, conversation %d KB, peak heap growth %d KB (limit %d KB)", fi.Size()>>20, finalBytes>>10, grew>>10, limit>>10)
	if grew > limit {
		t.Fatalf("reading a %d MB session grew the heap by %d MB at its peak, over a quarter of the file: the reader holds the file, not just the conversation", fi.Size()>>20, grew>>20)
	}
}
