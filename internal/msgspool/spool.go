// Package msgspool keeps a session's neutral messages in a private
// temporary file as they arrive, so a writer reads them back one at a
// time (in order, as often as it needs, or one by the position it was
// given) instead of cast holding the whole session in memory: `cast
// restore` of a session of hundreds of MB (issue 27). A Spool is an
// agents.MessageSource.
//
// Each message is one record: its cast.v1 protobuf encoding (what the
// export sent) after its length as a uvarint, so a message reads back
// exactly as it came.
package msgspool

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/fsutil"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/wire"
)

// Spool is messages written to a private temporary file. Add them first;
// reading flushes what was added. Not safe for concurrent use.
type Spool struct {
	f    *fsutil.Scratch
	w    *bufio.Writer
	size int64 // bytes added, flushed or not
	n    int
	buf  []byte // Add's encoding buffer, reused
}

// New makes an empty spool in dir (os.TempDir when ""), readable by this
// user only. Its name is removed at once, so a cast killed before Close
// leaves no copy of the conversation behind; the open file stays
// readable until Close.
func New(dir string) (*Spool, error) {
	f, err := fsutil.NewScratch(dir, "cast-spool-*") // 0600
	if err != nil {
		return nil, fmt.Errorf("msgspool: %w", err)
	}
	return &Spool{f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

// Add appends m.
func (s *Spool) Add(m transcript.Message) error { return s.AddProto(wire.ToProto(m)) }

// AddProto appends a message as the wire carries it.
func (s *Spool) AddProto(p *castv1.Message) error {
	var err error
	s.buf = binary.AppendUvarint(s.buf[:0], uint64(proto.Size(p)))
	if s.buf, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(s.buf, p); err != nil {
		return fmt.Errorf("msgspool: %w", err)
	}
	if _, err := s.w.Write(s.buf); err != nil {
		return fmt.Errorf("msgspool: %w", err)
	}
	s.size += int64(len(s.buf))
	s.n++
	if cap(s.buf) > 1<<20 {
		s.buf = nil // one large message does not keep its buffer
	}
	return nil
}

// Len implements agents.MessageSource.
func (s *Spool) Len() int { return s.n }

// Each implements agents.MessageSource: the messages in the order added,
// each at the offset of its record.
func (s *Spool) Each(each func(pos int64, m *transcript.Message) error) error {
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("msgspool: %w", err)
	}
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, s.size), 256<<10)
	for pos := int64(0); pos < s.size; {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			return fmt.Errorf("msgspool: record at %d: %w", pos, noEOF(err))
		}
		if n > uint64(s.size-pos) {
			return fmt.Errorf("msgspool: record at %d: length %d past the end", pos, n)
		}
		// A new buffer each time: the message's bytes fields may keep it.
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("msgspool: record at %d: %w", pos, noEOF(err))
		}
		m, err := decode(b)
		if err != nil {
			return fmt.Errorf("msgspool: record at %d: %w", pos, err)
		}
		if err := each(pos, &m); err != nil {
			return err
		}
		pos += int64(varintLen(n)) + int64(n)
	}
	return nil
}

// At implements agents.MessageSource.
func (s *Spool) At(pos int64) (transcript.Message, error) {
	if err := s.w.Flush(); err != nil {
		return transcript.Message{}, fmt.Errorf("msgspool: %w", err)
	}
	if pos < 0 || pos >= s.size {
		return transcript.Message{}, fmt.Errorf("msgspool: no record at %d of %d bytes", pos, s.size)
	}
	head := make([]byte, min(binary.MaxVarintLen64, s.size-pos))
	if _, err := s.f.ReadAt(head, pos); err != nil {
		return transcript.Message{}, fmt.Errorf("msgspool: record at %d: %w", pos, noEOF(err))
	}
	n, k := binary.Uvarint(head)
	if k <= 0 || n > uint64(s.size-pos-int64(k)) {
		return transcript.Message{}, fmt.Errorf("msgspool: record at %d: bad length", pos)
	}
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, pos+int64(k)); err != nil {
		return transcript.Message{}, fmt.Errorf("msgspool: record at %d: %w", pos, noEOF(err))
	}
	m, err := decode(b)
	if err != nil {
		return transcript.Message{}, fmt.Errorf("msgspool: record at %d: %w", pos, err)
	}
	return m, nil
}

// Close closes the spool; its file is gone after it.
func (s *Spool) Close() error { return s.f.Close() }

func decode(b []byte) (transcript.Message, error) {
	var p castv1.Message
	if err := proto.Unmarshal(b, &p); err != nil {
		return transcript.Message{}, err
	}
	return wire.FromProto(&p), nil
}

func varintLen(n uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], n)
}

// noEOF reports a record cut short as such, not as a clean end.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
