package gemini

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/transcript"
)

// BenchmarkWrite100k writes a 100k-message conversation natively and, in
// the same run, as plain encoding/json, both reported in MB/s of output.
func BenchmarkWrite100k(b *testing.B) {
	agenttest.BenchWrite100k(b, Writer{})
}

// BenchmarkReadEach reads a 32 MiB session of 2,000 messages with Read
// (one pass, holding every record and message) and with ReadEach (two
// passes, holding where each record is), in MB/s of file.
func BenchmarkReadEach(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"sessionId":"s1","projectHash":"h","kind":"main"}` + "\n")
	text := strings.Repeat("x", 16<<10)
	for i := range 2000 {
		typ := "user"
		if i%2 == 1 {
			typ = "gemini"
		}
		fmt.Fprintf(&buf, `{"id":"m%d","type":%q,"content":"%d %s"}`+"\n", i, typ, i, text)
	}
	data := buf.Bytes()
	for _, tc := range []struct {
		name string
		read func() (int, error)
	}{
		{"Read", func() (int, error) {
			d, err := Decode(data)
			return len(d.Messages), err
		}},
		{"ReadEach", func() (int, error) {
			n := 0
			err := Reader{}.ReadEach(bytes.NewReader(data), int64(len(data)), func(transcript.Message) error {
				n++
				return nil
			})
			return n, err
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if n, err := tc.read(); err != nil || n != 2000 {
					b.Fatalf("%d messages, %v", n, err)
				}
			}
		})
	}
}
