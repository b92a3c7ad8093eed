package kit

import (
	"bufio"
	"bytes"
	"io"
)

// EachLine calls fn with every non-blank line of r, trimmed, holding one
// line in memory at a time: native session files reach hundreds of MB
// and must not be read whole. fn must not keep line past its call.
func EachLine(r io.Reader, fn func(line []byte)) error {
	return EachLineAt(r, func(line []byte, _ int64, _ int) { fn(line) })
}

// EachLineAt is EachLine also telling where each line is in r: its first
// byte's offset and its length (untrimmed, the newline included), so a
// reader can come back to it (io.ReaderAt) instead of holding it.
func EachLineAt(r io.Reader, fn func(line []byte, off int64, n int)) error {
	br := bufio.NewReaderSize(r, 256<<10)
	var off int64
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: gather it whole.
			long := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			fn(t, off, len(line))
		}
		off += int64(len(line))
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
