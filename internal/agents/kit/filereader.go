package kit

import (
	"io"

	"github.com/cast-dev/cast/internal/transcript"
)

// Format is a native format whose session is one file that Decode reads as
// a stream (DecodeFile). It is a type parameter, not a value, so that an
// agent's Reader embedding FileReader stays a zero value ready to use
// (Reader{}), as the codecs register it.
type Format[D Decoded] interface {
	Decode(r io.ReadSeeker) (D, error)
}

// CwdFormat is a Format whose file names the folder its session ran in.
type CwdFormat[D Decoded] interface {
	Format[D]
	Cwd(d D) string
}

// FileReader is agents.Reader and agents.ReportingReader for a format F
// whose session is one file: an agent's Reader embeds it, so that every
// such reader reads, reports and decompresses the same way.
type FileReader[F Format[D], D Decoded] struct{}

// Read implements agents.Reader.
func (FileReader[F, D]) Read(path string) ([]transcript.Message, error) {
	var f F
	return ReadFile(path, f.Decode)
}

// ReadReport implements agents.ReportingReader.
func (FileReader[F, D]) ReadReport(path string) ([]transcript.Message, map[string]int, error) {
	var f F
	return ReportFile(path, f.Decode)
}

// CwdFileReader is FileReader that is also agents.CwdReader, for a format
// whose file names its folder.
type CwdFileReader[F CwdFormat[D], D Decoded] struct {
	FileReader[F, D]
}

// ReadCwd implements agents.CwdReader.
func (CwdFileReader[F, D]) ReadCwd(path string) (string, error) {
	var f F
	d, err := DecodeFile(path, f.Decode)
	return f.Cwd(d), err
}
