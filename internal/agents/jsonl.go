package agents

import (
	"bytes"
	"encoding/json"
	"io"
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
	enc := NewEncoder(&buf)
	if head != nil {
		if err := enc.Encode(head); err != nil {
			return nil, err
		}
	}
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
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
