package gemini

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
)

// readLegacy reads r as the legacy format, one JSON object holding every
// message, element by element rather than whole. ok is false when r is
// not one such object (a JSONL file, or garbage), exactly where
// unmarshalling all of r into a header would have failed or found no
// messages.
func readLegacy(r io.ReadSeeker) (h header, ok bool) {
	// A JSONL file's first line is a whole JSON value; a legacy file's
	// first line ("{") is not, unless it is all on one line, which the
	// line replay reads the same.
	first, _ := bufio.NewReaderSize(r, 64<<10).ReadSlice('\n')
	if first = bytes.TrimSpace(first); len(first) == 0 || first[0] != '{' || json.Valid(first) {
		return header{}, false
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return header{}, false
	}
	dec := json.NewDecoder(r)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return header{}, false
	}
	for dec.More() {
		tok, err := dec.Token()
		key, isKey := tok.(string)
		if err != nil || !isKey {
			return header{}, false
		}
		if !legacyField(dec, key, &h) {
			return header{}, false
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return header{}, false
	}
	if _, err := dec.Token(); err != io.EOF { // nothing after the object
		return header{}, false
	}
	return h, h.Messages != nil
}

// legacyField decodes the value of key into h, the messages one record
// at a time. Keys match case-insensitively, as encoding/json's do.
func legacyField(dec *json.Decoder, key string, h *header) bool {
	if strings.EqualFold(key, "messages") {
		return legacyMessages(dec, h)
	}
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

func legacyMessages(dec *json.Decoder, h *header) bool {
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	if tok == nil { // "messages": null
		h.Messages = nil
		return true
	}
	if tok != json.Delim('[') {
		return false
	}
	h.Messages = []record{}
	for dec.More() {
		var r record
		if dec.Decode(&r) != nil {
			return false
		}
		h.Messages = append(h.Messages, r)
	}
	_, err = dec.Token() // the closing bracket
	return err == nil
}
