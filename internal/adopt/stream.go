package adopt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"maps"
	"os"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// streamReader is the reader agent's files are read whole through, a
// message at a time (agents.StreamReader), when its driver parses no
// tail (a tail parser's growth is read as the lines it appended, and
// its settle window looks at them) and its files keep no subagents' runs
// (agents.RunsReader looks at the bytes added).
func streamReader(agent string) (agents.StreamReader, bool) {
	d, ok := driver(agent)
	if !ok {
		return nil, false
	}
	if _, tail := d.(agents.TailParser); tail {
		return nil, false
	}
	r, err := agents.ReaderFor(agent)
	if err != nil {
		return nil, false
	}
	if _, runs := r.(agents.RunsReader); runs {
		return nil, false
	}
	sr, ok := r.(agents.StreamReader)
	return sr, ok
}

// followEach is follow for a file read through sr: its bytes are copied
// to a snapshot, hashed as they go, and its messages sent in batches as
// sr reads them from the snapshot, so neither the file's bytes nor its
// messages are ever all in memory (a Gemini session reaches hundreds of
// MB). What follow keeps holds: a half-written last line waits, each
// message is kept once (by digest), a rewritten file is read again
// without repeats, a file cast wrote is its cast session's, and the
// state records exactly the bytes read.
func (f *Follower) followEach(ctx context.Context, agent, path string, fi os.FileInfo, st *fileState, sr agents.StreamReader) (int, error) {
	var mark int64 // where what was read ended: its hash is taken on the way
	if st != nil {
		mark = st.Size
	}
	snap, err := takeSnapshot(f.st, path, mark)
	if err != nil {
		return 0, err
	}
	defer snap.close()
	c := snapshotContent{s: snap, r: sr}
	if rec, ok := f.cast.Wrote(path); ok && rec.SessionID != "" && (st == nil || st.Written != rec.SHA256) {
		// cast wrote it (a restore) since the follower last looked
		if st, err = f.baseline(agent, path, c, rec); err != nil {
			return 0, err
		}
	}
	if st == nil {
		st = &fileState{Agent: agent, NativeID: nativeID(agent, path), Sent: map[string]int{}}
	}
	sent := 0
	if snap.end != st.Size || snap.sum != st.Hash { // else no whole line more
		from, err := eachFrom(st, c)
		if err != nil {
			return 0, err
		}
		if sent, err = f.sendEach(ctx, agent, path, st, c, from); err != nil {
			return sent, err
		}
	}
	st.Size, st.Hash, st.ModTime, st.Torn, st.Base = snap.end, snap.sum, fi.ModTime().UnixNano(), snap.size-snap.end, nil
	return sent, f.st.put(path, st)
}

// errSeen stops a read whose answer is known.
var errSeen = errors.New("seen")

// eachFrom is what c's occurrences count from, read whole: its start, or
// all kept when the file was begun again (beginsAgain). Only a file no
// longer starting with what was read may be, so only such a file is read
// the once more that tells.
func eachFrom(st *fileState, c content) (map[string]int, error) {
	if st.Size == 0 || st.Newest == 0 {
		return map[string]int{}, nil
	}
	if st.Size <= c.size() {
		if sum, err := c.hash(st.Size); err != nil || sum == st.Hash {
			return map[string]int{}, err // grown
		}
	}
	n := newer{than: st.Newest}
	err := c.each(c.size(), func(m transcript.Message) error {
		if !n.see(m) {
			return errSeen
		}
		return nil
	})
	if err != nil && !errors.Is(err, errSeen) {
		return nil, err
	}
	if n.all() {
		return tailFrom(st), nil
	}
	return map[string]int{}, nil
}

// sendEach sends the messages of c not kept yet, as they are read. A new
// session's first batch says its title and how many messages it holds in
// all, so for one c is read twice: counting, then sending.
func (f *Follower) sendEach(ctx context.Context, agent, path string, st *fileState, c content, from map[string]int) (int, error) {
	o := origin{Key: path, Path: path}
	name, history := "", int64(0)
	if st.SessionID == "" {
		o.Cwd = cwdOf(agent, path)
		sub := subagentOf(agent, path)
		o.ParentNativeID, o.CallID = sub.ParentNativeID, sub.CallID
		u := fresh{sent: maps.Clone(st.Sent), seen: maps.Clone(from)}
		err := c.each(c.size(), func(m transcript.Message) error {
			if u.take(&m) {
				history++
				if name == "" {
					name = agents.Title([]transcript.Message{m}, 60)
				}
			}
			return nil
		})
		if err != nil || history == 0 {
			return 0, err
		}
		if name == "" {
			name = title(nil, path)
		}
	}
	s := f.sender(ctx, agent, o, st, name, history)
	u := fresh{sent: maps.Clone(st.Sent), seen: maps.Clone(from)}
	var k keptAfter
	newest := st.Newest
	err := c.each(c.size(), func(m transcript.Message) error {
		newest = max(newest, timeOf(m))
		isNew := u.take(&m)
		return k.next(m, isNew, s.add)
	})
	if err == nil {
		err = k.flush(s.add)
	}
	if err != nil {
		return s.sent, err
	}
	sent, err := s.done()
	if err == nil {
		st.Newest = newest
	}
	return sent, err
}

// content is a file's whole lines as the follower read them: the bytes
// (inMemory), or a snapshot read a message at a time.
type content interface {
	size() int64
	// hash is the SHA-256 of the first n bytes.
	hash(n int64) (string, error)
	// each hands fn the messages of the first n bytes, in order.
	each(n int64, fn func(transcript.Message) error) error
}

// inMemory is a file's whole lines read whole (a driver with no
// StreamReader), parsed with agent's reader.
type inMemory struct {
	st    *states // where readBytes puts its copy
	agent string
	data  []byte
}

func (c inMemory) size() int64                  { return int64(len(c.data)) }
func (c inMemory) hash(n int64) (string, error) { return hashOf(c.data[:n]), nil }
func (c inMemory) each(n int64, fn func(transcript.Message) error) error {
	msgs, err := readBytes(c.st, c.agent, c.data[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

// snapshotContent is a snapshot's whole lines read through r.
type snapshotContent struct {
	s *snapshot
	r agents.StreamReader
}

func (c snapshotContent) size() int64 { return c.s.end }

func (c snapshotContent) hash(n int64) (string, error) {
	if n == c.s.end {
		return c.s.sum, nil
	}
	if n == c.s.mark && c.s.markSum != "" {
		return c.s.markSum, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(c.s.f, 0, n)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (c snapshotContent) each(n int64, fn func(transcript.Message) error) error {
	return c.r.ReadEach(c.s.f, n, fn)
}

// snapshot is a private copy of a native file, taken once, that its
// reader may read more than once (the file may grow or be rewritten
// meanwhile): what is parsed is exactly what was hashed. It is kept in
// the follower's snapshot folder (states.tempFile).
type snapshot struct {
	f    *os.File
	size int64  // bytes copied
	end  int64  // of them, whole lines: a half-written last line waits
	sum  string // SHA-256 of the first end bytes, taken as they were copied
	// mark is an offset whose hash was asked for, markSum that hash when a
	// line ends there (taken as the bytes were copied, as sum).
	mark    int64
	markSum string
}

// takeSnapshot copies the file at path, taking the hash of its first mark
// bytes on the way where a line ends there (0: none).
func takeSnapshot(st *states, path string, mark int64) (*snapshot, error) {
	src, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	tmp, err := st.tempFile("copy-*")
	if err != nil {
		return nil, err
	}
	s := &snapshot{f: tmp, mark: mark}
	w := &lineHash{h: sha256.New(), mark: mark}
	if s.size, err = io.Copy(tmp, io.TeeReader(src, w)); err != nil {
		s.close()
		return nil, err
	}
	s.end, s.markSum = w.end, w.markSum
	if s.sum, err = w.sum(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *snapshot) close() {
	_ = s.f.Close()
	_ = os.Remove(s.f.Name())
}

// lineHash hashes what is written to it and keeps the hash's state as it
// was at the end of the last whole line (end), so the sum of the whole
// lines comes without a second read.
type lineHash struct {
	h     hash.Hash
	n     int64
	end   int64
	state []byte // h's state at end; nil: at 0
	// mark is an offset whose sum is kept (markSum) if a line ends there.
	mark    int64
	markSum string
}

func (w *lineHash) Write(p []byte) (int, error) {
	n := len(p)
	if k := w.mark - w.n; k > 0 && k <= int64(n) && p[k-1] == '\n' {
		// The line ending at mark is in p: hashed up to it, the sum of
		// the whole lines is the one asked for.
		if err := w.write(p[:k]); err != nil {
			return 0, err
		}
		var err error
		if w.markSum, err = w.sum(); err != nil {
			return 0, err
		}
		p = p[k:]
	}
	return n, w.write(p)
}

// write hashes p, keeping the hash's state at the last line end.
func (w *lineHash) write(p []byte) error {
	if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
		w.h.Write(p[:i+1])
		state, err := w.h.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			return err
		}
		w.state, w.end = state, w.n+int64(i+1)
		w.h.Write(p[i+1:])
	} else {
		w.h.Write(p)
	}
	w.n += int64(len(p))
	return nil
}

// sum is the hex SHA-256 of the whole lines written.
func (w *lineHash) sum() (string, error) {
	h := sha256.New()
	if w.state != nil {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(w.state); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
