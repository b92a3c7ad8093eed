package kit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/cast-dev/cast/internal/fsutil"
)

// RemoveIndexEntry removes key from the JSON object under the top-level
// field parent of the file at path (`{"projects": {key: ...}}`). The rest
// of the file stays as the CLI wrote it: every other entry in its order,
// values byte for byte, re-indented with two spaces (as JSON.stringify(v,
// null, 2) writes it), the file's trailing newline and mode kept; the new
// file replaces the old atomically. A missing file, or one without the
// entry, is left untouched.
func RemoveIndexEntry(path, parent, key string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	top, err := objectEntries(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	removed := false
	for i, e := range top {
		if e.key != parent {
			continue
		}
		inner, err := objectEntries(e.val)
		if err != nil {
			return fmt.Errorf("%s: %q: %w", path, parent, err)
		}
		kept := inner[:0]
		for _, in := range inner {
			if in.key == key {
				removed = true
				continue
			}
			kept = append(kept, in)
		}
		if top[i].val, err = encodeObject(kept); err != nil {
			return err
		}
	}
	if !removed {
		return nil
	}
	compact, err := encodeObject(top)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		return err
	}
	if bytes.HasSuffix(data, []byte("\n")) {
		out.WriteByte('\n')
	}
	return fsutil.WriteFileAtomic(path, out.Bytes(), fi.Mode().Perm())
}

// entry is one member of a JSON object, its value as it was written.
type entry struct {
	key string
	val json.RawMessage
}

// objectEntries reads a JSON object's members in the order they are in.
func objectEntries(data []byte) ([]entry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var out []entry
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		out = append(out, entry{key: t.(string), val: val})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return out, nil
}

// encodeObject writes entries as a compact JSON object, in their order.
func encodeObject(entries []entry) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // as the CLI wrote it: `<`, `&` stay themselves
		if err := enc.Encode(e.key); err != nil {
			return nil, err
		}
		b.Truncate(b.Len() - 1) // Encode's newline
		b.WriteByte(':')
		b.Write(e.val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
