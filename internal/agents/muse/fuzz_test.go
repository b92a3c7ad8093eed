package muse

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode checks that no input makes the reader panic or return a
// message that breaks the neutral model's rules or cannot be stored.
// Run it with -fuzzminimizetime 2s: minimizing an interesting input the
// size of the seeds otherwise stalls the worker for the whole run.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/session-*.jsonl")
	if len(files) == 0 {
		f.Fatal("no corpus")
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode(data)
		if err != nil {
			return
		}
		for i, m := range d.Messages {
			if err := m.Validate(); err != nil {
				t.Fatalf("message %d invalid: %v", i, err)
			}
			if m.Agent != Agent || m.NativeID == "" {
				t.Fatalf("message %d lacks agent or native id: %+v", i, m)
			}
			if _, err := json.Marshal(m); err != nil {
				t.Fatalf("message %d does not marshal: %v", i, err)
			}
		}
	})
}
