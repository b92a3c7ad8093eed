package kit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fsutil"
)

// NewEncoder is a JSON encoder for native files: without HTML escaping,
// so "<" and "&" in a user's code reach the CLI, and the model, as they
// are (not as \u003c).
func NewEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// JSONLines is head (unless nil) and then each of recs, one JSON line each,
// encoded as NewEncoder does.
func JSONLines[T any](head any, recs []T) ([]byte, error) {
	var buf bytes.Buffer
	if err := encodeLines(&buf, head, noErrors(slices.Values(recs))); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// encodeLines writes head (unless nil) and then each of recs to w, one
// JSON line each; an error recs yields stops it and is returned.
func encodeLines[T any](w io.Writer, head any, recs iter.Seq2[T, error]) error {
	enc := NewEncoder(w)
	if head != nil {
		if err := enc.Encode(head); err != nil {
			return err
		}
	}
	for r, err := range recs {
		if err != nil {
			return err
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// Records is the sequence of records render emits, for StreamJSONL:
// render hands each over through emit as it makes it, and emit fails
// (render returns its error) once the file wants no more; an error of
// render's own (its messages could not be read) is yielded last.
func Records[T any](render func(emit func(T) error) error) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		err := render(func(r T) error {
			if !yield(r, nil) {
				return errStopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopped) {
			var zero T
			yield(zero, err)
		}
	}
}

// Ahead pulls records from recs until enough says a file's header can be
// written (it carries what the first records say, such as the time of the
// first message) or recs ends, and gives all of recs back for StreamJSONL:
// those pulled, then the rest as recs yields them, so the records are
// still never all held. An error recs yields while pulling is returned
// (recs then released). Otherwise call stop when done with all, read or
// not, to release recs.
func Ahead[T any](recs iter.Seq2[T, error], enough func(pulled []T) bool) (pulled []T, all iter.Seq2[T, error], stop func(), err error) {
	next, stop := iter.Pull2(recs)
	for !enough(pulled) {
		r, err, ok := next()
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		if !ok {
			break
		}
		pulled = append(pulled, r)
	}
	all = func(yield func(T, error) bool) {
		for _, r := range pulled {
			if !yield(r, nil) {
				return
			}
		}
		for {
			r, err, ok := next()
			if !ok || !yield(r, err) || err != nil {
				return
			}
		}
	}
	return pulled, all, stop, nil
}

// errStopped is emit's error once the consumer of Records stopped.
var errStopped = errors.New("kit: the records' consumer stopped")

// noErrors is recs, none of them failing.
func noErrors[T any](recs iter.Seq[T]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// WriteJSONL writes head and recs (as JSONLines) to path, private and in
// one rename so the CLI never reads half a file: session sid's native
// transcript.
func WriteJSONL[T any](path, sid string, head any, recs []T) (agents.Written, error) {
	return StreamJSONL(path, sid, head, noErrors(slices.Values(recs)))
}

// StreamJSONL is WriteJSONL for records made as they are written: each is
// encoded to the temp file beside path as it comes, so neither all the
// records nor the file's bytes are held at once (a Gemini session of
// 400 MB, issue 27). An error recs yields (its messages could not be
// read) stops the write and leaves path as it was.
func StreamJSONL[T any](path, sid string, head any, recs iter.Seq2[T, error]) (agents.Written, error) {
	err := fsutil.WriteAtomic(path, 0o600, func(w io.Writer) error {
		return encodeLines(w, head, recs)
	})
	if err != nil {
		return agents.Written{}, err
	}
	return agents.Written{NativeID: sid, Path: path}, nil
}

// StreamSessionJSONL is StreamJSONL to the file of session sid in dir,
// made if missing: existing, the session's file found there (a rewrite
// replaces it rather than leave two files with one session id), else a
// new one named fresh.
func StreamSessionJSONL[T any](dir, existing, fresh, sid string, head any, recs iter.Seq2[T, error]) (agents.Written, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return agents.Written{}, err
	}
	path := existing
	if path == "" {
		path = filepath.Join(dir, fresh)
	}
	return StreamJSONL(path, sid, head, recs)
}

// StringJSON reads content that may be a JSON string: "" and true for
// nothing (empty or null), the string and true for a string, and false
// for any other JSON, which the caller reads its own way.
func StringJSON(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return "", false
}

// RawJSON is v encoded as NewEncoder does, without the newline; orElse
// when v does not encode.
func RawJSON(v any, orElse string) json.RawMessage {
	var buf bytes.Buffer
	if err := NewEncoder(&buf).Encode(v); err != nil {
		return json.RawMessage(orElse)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// DecodeList decodes a JSON array of T leniently: an element that does not
// decode as T is left out, and its neighbours are kept (one odd content
// block must not lose a message). nil when raw is not an array.
func DecodeList[T any](raw json.RawMessage) []T {
	out, _ := DecodeElems[T](raw)
	return out
}

// DecodeElems is DecodeList that also says how many elements it left out,
// so a reader can count them in its report instead of losing them
// silently. A value that is there but is no list (an object, a number, a
// broken text) is one element left out; nothing (empty, null) is none.
func DecodeElems[T any](raw json.RawMessage) (out []T, bad int) {
	if json.Unmarshal(raw, &out) == nil {
		return out, 0
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
			return nil, 0
		}
		return nil, 1
	}
	out = nil
	for _, e := range elems {
		var v T
		if json.Unmarshal(e, &v) == nil {
			out = append(out, v)
		} else {
			bad++
		}
	}
	return out, bad
}

// Undecoded names, for a reader's report, a JSONL line that gave no
// record: "malformed line" when it is no JSON object with a "type", else
// "<type> record that did not decode" (a field of another JSON type, say),
// so a decoding failure is told from a broken line.
func Undecoded(line []byte) string {
	var probe struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(line, &probe) != nil || probe.Type == "" {
		return "malformed line"
	}
	return probe.Type + " record that did not decode"
}

// CompactJSON is raw without insignificant space, or "{}" when raw is
// empty or not JSON (what a tool call's input falls back to).
func CompactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil {
		return "{}"
	}
	return b.String()
}

// ParseTime reads an RFC 3339 stamp of a native file; a missing or odd
// one is the zero time (the message keeps no time).
func ParseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
