package gemini

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
)

// legacy is what readLegacy found at the top of a legacy document.
type legacy struct {
	header
	// array is which of the document's "messages" values (counted from
	// 0) holds its records: the last, as unmarshalling would keep.
	array  int
	arrays int
	null   bool // the last "messages" was null
}

// readLegacy reads r as the legacy format, one JSON object holding every
// message, element by element rather than whole, handing each record to
// each with the index of the "messages" array it is in (false from each
// stops the read, ok false). ok is false when r is not one such object
// (a JSONL file, or garbage), exactly where unmarshalling all of r into
// a header would have failed or found no messages.
func readLegacy(r io.ReadSeeker, each func(array int, rec record) bool) (lg legacy, ok bool) {
	// A JSONL file's first line is a whole JSON value; a legacy file's
	// first line ("{") is not, unless it is all on one line, which the
	// line replay reads the same.
	first, _ := bufio.NewReaderSize(r, 64<<10).ReadSlice('\n')
	if first = bytes.TrimSpace(first); len(first) == 0 || first[0] != '{' || json.Valid(first) {
		return legacy{}, false
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return legacy{}, false
	}
	dec := json.NewDecoder(r)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return legacy{}, false
	}
	for dec.More() {
		tok, err := dec.Token()
		key, isKey := tok.(string)
		if err != nil || !isKey {
			return legacy{}, false
		}
		if !legacyField(dec, key, &lg, each) {
			return legacy{}, false
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return legacy{}, false
	}
	if _, err := dec.Token(); err != io.EOF { // nothing after the object
		return legacy{}, false
	}
	lg.array = lg.arrays - 1
	return lg, lg.arrays > 0 && !lg.null
}

// legacyField decodes the value of key into lg, the messages one record
// at a time. Keys match case-insensitively, as encoding/json's do.
func legacyField(dec *json.Decoder, key string, lg *legacy, each func(int, record) bool) bool {
	if strings.EqualFold(key, "messages") {
		return legacyMessages(dec, lg, each)
	}
	h := &lg.header
	fields := []struct {
		name string
		dst  *string
	}{
		{"sessionId", &h.SessionID}, {"projectHash", &h.ProjectHash}, {"startTime", &h.StartTime},
		{"lastUpdated", &h.LastUpdated}, {"kind", &h.Kind}, {"summary", &h.Summary},
	}
	for _, f := range fields {
		if strings.EqualFold(key, f.name) {
			return dec.Decode(f.dst) == nil
		}
	}
	var skip json.RawMessage // a field cast does not use
	return dec.Decode(&skip) == nil
}

func legacyMessages(dec *json.Decoder, lg *legacy, each func(int, record) bool) bool {
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	if tok == nil { // "messages": null
		lg.null = true
		return true
	}
	if tok != json.Delim('[') {
		return false
	}
	lg.null = false
	array := lg.arrays
	lg.arrays++
	for dec.More() {
		var r record
		if dec.Decode(&r) != nil || !each(array, r) {
			return false
		}
	}
	_, err = dec.Token() // the closing bracket
	return err == nil
}
