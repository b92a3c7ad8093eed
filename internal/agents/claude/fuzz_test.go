package claude

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
)

// FuzzRead feeds arbitrary bytes to the reader, seeded with the corpus: it
// must never panic, and whatever it reads must be valid neutral messages
// that the writer can render into a file the structural rules accept.
func FuzzRead(f *testing.F) {
	for _, p := range corpusFiles(f) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"type":"user","uuid":"a","parentUuid":"a","message":{"role":"user","content":"loop"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, _, err := Parse(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range msgs {
			if err := m.Validate(); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		dir := t.TempDir()
		w, err := Writer{}.Write(agents.Target{Home: filepath.Join(dir, "h"), Cwd: dir, SessionID: "fuzz"}, msgs)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) > 0 {
			checkFile(t, w.Path)
			if _, err := (Reader{}).Read(w.Path); err != nil {
				t.Fatal(err)
			}
		}
	})
}
