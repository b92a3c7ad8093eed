package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/cast-dev/cast/internal/agents/kit"
)

// errChanged is a second pass finding other bytes than the first.
var errChanged = errors.New("gemini: the session file changed while it was read")

// replay finds the records of the session in r's first size bytes, as
// the CLI itself does on load; skip is told what it leaves out. With
// keep the records are held as read; else only where each one is, and
// records reads them again.
func replay(r io.ReaderAt, size int64, keep bool, skip func(kind string)) (*lineReplay, error) {
	l := &lineReplay{index: map[string]int{}, skip: skip, keep: keep}
	// The legacy format is one JSON object holding every message.
	if lg, ok := readLegacy(io.NewSectionReader(r, 0, size), l.legacyRecord); ok {
		l.legacy, l.sid, l.kind, l.used, l.legacyArray = true, lg.SessionID, lg.Kind, 1, lg.array
		if keep {
			l.refs = l.refs[:0]
			for _, rec := range l.legacyRecs[lg.array] {
				l.refs = append(l.refs, ref{rec: rec})
			}
		}
		l.legacyRecs = nil
		return l, nil
	}
	l.legacyRecs = nil
	err := kit.EachLineAt(io.NewSectionReader(r, 0, size), l.line)
	return l, err
}

// lineReplay replays a JSONL session a line at a time.
type lineReplay struct {
	refs          []ref
	index         map[string]int // record id: its place in refs
	sid           string
	kind          string // the header's: "main", or "subagent" for a run another session started
	used, skipped int
	skip          func(kind string)
	keep          bool
	// legacy: the file is one JSON document, its records the elements of
	// its legacyArray-th "messages" array (the last one counts).
	legacy      bool
	legacyArray int
	legacyRecs  map[int][]record // keep: the records of each array, while reading
}

// ref is one record of the replay: the record (keep), or where its last
// version is: the line at off, n bytes long, that is the record (elem
// -1) or holds it as its elem-th message (set: in a $set; else in a
// header).
type ref struct {
	id   string
	rec  record
	off  int64
	n    int
	elem int
	set  bool
}

func (l *lineReplay) legacyRecord(array int, r record) bool {
	if l.keep {
		if l.legacyRecs == nil {
			l.legacyRecs = map[int][]record{}
		}
		l.legacyRecs[array] = append(l.legacyRecs[array], r)
	}
	return true
}

func (l *lineReplay) reindex() {
	clear(l.index)
	for i, r := range l.refs {
		l.index[r.id] = i
	}
}

// upsert: records are upserts: a streamed answer is written again,
// complete, under the same id, and keeps its first position.
func (l *lineReplay) upsert(r ref) {
	if i, ok := l.index[r.id]; ok {
		l.refs[i] = r
		return
	}
	l.index[r.id] = len(l.refs)
	l.refs = append(l.refs, r)
}

// at is the ref of r, read at off (n bytes) as elem (see ref).
func (l *lineReplay) at(r record, off int64, n, elem int, set bool) ref {
	if l.keep {
		return ref{id: r.ID, rec: r}
	}
	return ref{id: r.ID, off: off, n: n, elem: elem, set: set}
}

func (l *lineReplay) bad(kind string) {
	l.skipped++
	l.skip(kind)
}

func (l *lineReplay) line(line []byte, off int64, n int) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(line, &obj) != nil {
		l.bad("malformed line")
		return
	}
	// Same precedence as the CLI's loader: rewind, message, $set, header.
	switch {
	case isString(obj["$rewindTo"]):
		var id string
		_ = json.Unmarshal(obj["$rewindTo"], &id)
		if i, ok := l.index[id]; ok {
			l.refs = l.refs[:i]
		} else {
			l.refs = nil // the CLI clears everything on an unknown target
		}
		l.reindex()
	case isString(obj["id"]):
		var r record
		if json.Unmarshal(line, &r) != nil || r.ID == "" {
			l.bad("message record that did not decode")
			return
		}
		l.upsert(l.at(r, off, n, -1, false))
	case isSet(obj):
		set, err := decodeSet(obj)
		if err != nil {
			l.bad("$set record that did not decode")
			return
		}
		if set.SessionID != "" {
			l.sid = set.SessionID
		}
		if set.Messages != nil {
			l.refs = nil
			l.reindex()
			l.upsertAll(*set.Messages, off, n, true)
		}
	case isString(obj["sessionId"]):
		var h header
		if json.Unmarshal(line, &h) != nil {
			l.bad("session header that did not decode")
			return
		}
		l.sid, l.kind = h.SessionID, h.Kind
		l.upsertAll(h.Messages, off, n, false)
	default:
		l.bad("line of an unknown shape")
		return
	}
	l.used++
}

// upsertAll upserts recs, the messages of the line at off; one without
// an id cannot be placed (records are found by id) and is counted.
func (l *lineReplay) upsertAll(recs []record, off int64, n int, set bool) {
	for i, r := range recs {
		if r.ID == "" {
			l.skip("message without an id")
			continue
		}
		l.upsert(l.at(r, off, n, i, set))
	}
}

// setLine is what a $set line sets.
type setLine struct {
	SessionID string    `json:"sessionId"`
	Messages  *[]record `json:"messages"`
}

func isSet(obj map[string]json.RawMessage) bool {
	return len(obj["$set"]) > 0 && obj["$set"][0] == '{'
}

func decodeSet(obj map[string]json.RawMessage) (setLine, error) {
	var set setLine
	err := json.Unmarshal(obj["$set"], &set)
	return set, err
}

func isString(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '"' }

// records hands fn the replayed records in order: those kept, or each
// read again where it is in r (the last line holding several records,
// a $set or a header, stays decoded until another such line is needed,
// so its records are decoded once however the other lines interleave).
func (l *lineReplay) records(r io.ReaderAt, size int64, fn func(record) error) error {
	if l.legacy && !l.keep {
		return l.legacyAgain(r, size, fn)
	}
	var cache struct {
		off  int64
		recs []record
	}
	cache.off = -1
	for _, f := range l.refs {
		if l.keep {
			if err := fn(f.rec); err != nil {
				return err
			}
			continue
		}
		line := make([]byte, f.n)
		if _, err := r.ReadAt(line, f.off); err != nil {
			return err
		}
		line = bytes.TrimSpace(line)
		var rec record
		switch {
		case f.elem < 0:
			if json.Unmarshal(line, &rec) != nil || rec.ID != f.id {
				return errChanged
			}
		default:
			if cache.off != f.off {
				recs, err := lineRecords(line, f.set)
				if err != nil {
					return err
				}
				cache.off, cache.recs = f.off, recs
			}
			if f.elem >= len(cache.recs) || cache.recs[f.elem].ID != f.id {
				return errChanged
			}
			rec = cache.recs[f.elem]
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	return nil
}

// lineRecords are the messages a $set line (set) or a header sets.
func lineRecords(line []byte, set bool) ([]record, error) {
	if !set {
		var h header
		if json.Unmarshal(line, &h) != nil {
			return nil, errChanged
		}
		return h.Messages, nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(line, &obj) != nil || !isSet(obj) {
		return nil, errChanged
	}
	s, err := decodeSet(obj)
	if err != nil || s.Messages == nil {
		return nil, errChanged
	}
	return *s.Messages, nil
}

// legacyAgain reads a legacy document's records again, handing fn those
// of the array that counts.
func (l *lineReplay) legacyAgain(r io.ReaderAt, size int64, fn func(record) error) error {
	var ferr error
	_, ok := readLegacy(io.NewSectionReader(r, 0, size), func(array int, rec record) bool {
		if array != l.legacyArray {
			return true
		}
		ferr = fn(rec)
		return ferr == nil
	})
	if ferr != nil {
		return ferr
	}
	if !ok {
		return errChanged
	}
	return nil
}
