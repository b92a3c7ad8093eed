package kit

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/transcript"
)

// Decoded is what a reader got out of one native file: the messages it
// kept and, by kind, what it left out.
type Decoded interface {
	Report() ([]transcript.Message, Skips)
}

// Decoding is what every decoded native file holds: the messages the
// reader kept and what it left out. An agent's decoded form embeds it, and
// so is a Decoded.
type Decoding struct {
	Messages []transcript.Message
	// Kinds counts what was left out because the reader does not know it
	// (malformed lines, records of other versions), by kind, so that an
	// import can say what it did not keep.
	Kinds Skips
}

// Report implements Decoded.
func (d Decoding) Report() ([]transcript.Message, Skips) { return d.Messages, d.Kinds }

// Skips counts what a reader left out, by kind; the zero value is ready.
type Skips map[string]int

// Add counts one left-out line or record of kind.
func (s *Skips) Add(kind string) {
	if *s == nil {
		*s = Skips{}
	}
	(*s)[kind]++
}

// DecodeFile opens path and decodes it with decode, which reads the file
// as a stream: sessions of hundreds of MB exist, so no reader is made to
// take a file whole.
//
// A file compressed with zstd (".zst": Codex compresses rollouts idle for
// a week) is decompressed into a temporary file first, so decode still
// streams and may seek.
func DecodeFile[D any](path string, decode func(io.ReadSeeker) (D, error)) (D, error) {
	var zero D
	f, err := os.Open(path)
	if err != nil {
		return zero, err
	}
	defer f.Close()
	if !strings.HasSuffix(path, ZstdSuffix) {
		return decode(f)
	}
	plain, err := unzstd(f)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	defer plain.Close()
	return decode(plain)
}

// ZstdSuffix ends the name of a native file compressed with zstd.
const ZstdSuffix = ".zst"

// unzstd decompresses r into a new nameless temporary file, rewound.
func unzstd(r io.Reader) (*fsutil.Scratch, error) {
	dec, err := zstd.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	defer dec.Close()
	tmp, err := fsutil.NewScratch("", "cast-unzstd-*")
	if err != nil {
		return nil, err
	}
	if _, err = io.Copy(tmp, dec); err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err != nil {
		_ = tmp.Close()
		return nil, fmt.Errorf("zstd: %w", err)
	}
	return tmp, nil
}

// ReportFile is agents.ReportingReader.ReadReport for a reader whose
// session is one file that decode reads.
func ReportFile[D Decoded](path string, decode func(io.ReadSeeker) (D, error)) ([]transcript.Message, map[string]int, error) {
	d, err := DecodeFile(path, decode)
	msgs, skips := d.Report()
	return msgs, skips, err
}

// ReadFile is agents.Reader.Read for the same readers: ReportFile
// without the skip counts.
func ReadFile[D Decoded](path string, decode func(io.ReadSeeker) (D, error)) ([]transcript.Message, error) {
	msgs, _, err := ReportFile(path, decode)
	return msgs, err
}
