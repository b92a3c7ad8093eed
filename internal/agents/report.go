package agents

import (
	"io"
	"os"

	"github.com/cast-dev/cast/internal/transcript"
)

// Decoded is what a reader got out of one native file: the messages it
// kept and, by kind, what it left out.
type Decoded interface {
	Report() ([]transcript.Message, Skips)
}

// DecodeFile opens path and decodes it with decode, which reads the file
// as a stream: sessions of hundreds of MB exist, so no reader is made to
// take a file whole.
func DecodeFile[D any](path string, decode func(io.ReadSeeker) (D, error)) (D, error) {
	f, err := os.Open(path)
	if err != nil {
		var zero D
		return zero, err
	}
	defer f.Close()
	return decode(f)
}

// ReportFile is ReportingReader.ReadReport for a reader whose session is
// one file that decode reads.
func ReportFile[D Decoded](path string, decode func(io.ReadSeeker) (D, error)) ([]transcript.Message, map[string]int, error) {
	d, err := DecodeFile(path, decode)
	msgs, skips := d.Report()
	return msgs, skips, err
}

// ReadFile is Reader.Read for the same readers: ReportFile without the
// skip counts.
func ReadFile[D Decoded](path string, decode func(io.ReadSeeker) (D, error)) ([]transcript.Message, error) {
	msgs, _, err := ReportFile(path, decode)
	return msgs, err
}
