package gemini

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// contains finds a string anywhere, across the reads it is cut into.
func TestContains(t *testing.T) {
	const id = "sess-0123456789"
	big := strings.Repeat("x", 3<<20)
	tests := []struct {
		name string
		data string
		want bool
	}{
		{"empty", "", false},
		{"alone", id, true},
		{"absent", big, false},
		{"at the start", id + big, true},
		{"across the first read's end", big[:1<<20-5] + id + big, true},
		{"right after the first read", big[:1<<20] + id + big, true},
		{"at the end", big + id, true},
		{"cut at the end", big + id[:len(id)-1], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := contains(strings.NewReader(tt.data), int64(len(tt.data)), []byte(id)); got != tt.want {
				t.Fatalf("contains = %v, want %v", got, tt.want)
			}
		})
	}
}

// FindSession picks the longer of two files for an id (a resume's stray
// header beside the transcript) and reads a large one as a stream: `cast
// restore` calls it right after writing a session of hundreds of MB, and
// reading that whole was restore's memory peak (issue 27).
func TestFindSessionStreamsTheFile(t *testing.T) {
	home := t.TempDir()
	chats := filepath.Join(home, "tmp", "proj", "chats")
	if err := os.MkdirAll(chats, 0o755); err != nil {
		t.Fatal(err)
	}
	const id = "big-session"
	big := filepath.Join(chats, "session-2026-01-01T00-00-big-sess.jsonl")
	writeRewrittenSession(t, big, 32<<20, 40)
	stray := filepath.Join(chats, "session-2026-01-02T00-00-big-sess.jsonl")
	if err := os.WriteFile(stray, []byte(`{"sessionId":"big-session","projectHash":"h"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(chats, "session-2026-01-03T00-00-big-sess.jsonl")
	if err := os.WriteFile(other, bytes.Repeat([]byte(`{"id":"u","type":"user","content":"hi"}`+"\n"), 3), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(big)
	if err != nil {
		t.Fatal(err)
	}

	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	base := heapObjects()
	h := sampleHeap()
	got := Driver{}.FindSession(home, id)
	peak := h.Stop()
	if got != big {
		t.Fatalf("FindSession = %s, want %s", got, big)
	}
	grew, limit := int64(peak)-int64(base), fi.Size()/4
	t.Logf("file %d MiB, peak heap growth %d KiB (limit %d KiB)", fi.Size()>>20, grew>>10, limit>>10)
	if grew > limit {
		t.Fatalf("finding a %d MiB session grew the heap by %d MiB at its peak: FindSession holds the file", fi.Size()>>20, grew>>20)
	}
}
