package codex

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the reader, seeded with every rollout in
// testdata: it must never panic and must only return valid messages.
func FuzzParse(f *testing.F) {
	_ = filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
			if b, err := os.ReadFile(path); err == nil {
				f.Add(b)
			}
		}
		return nil
	})
	f.Add([]byte(`{"type":"response_item","payload":{"type":"function_call_output","call_id":"x","output":[{"type":"input_image"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, _ := Parse(bytes.NewReader(data))
		for i, m := range p.Messages {
			if err := m.Validate(); err != nil {
				t.Fatalf("message %d invalid: %v", i, err)
			}
		}
		if p.Skipped > p.Lines {
			t.Fatalf("skipped %d of %d lines", p.Skipped, p.Lines)
		}
	})
}
