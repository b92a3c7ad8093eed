package gemini

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/cast-dev/cast/internal/transcript"
)

// readEach is what ReadEach hands over for data.
func readEach(data []byte) ([]transcript.Message, error) {
	var got []transcript.Message
	err := Reader{}.ReadEach(bytes.NewReader(data), int64(len(data)), func(m transcript.Message) error {
		got = append(got, m)
		return nil
	})
	return got, err
}

// sameAsDecode fails unless ReadEach gives Decode's messages, in order,
// and fails where it fails.
func sameAsDecode(t *testing.T, data []byte) {
	t.Helper()
	d, derr := Decode(data)
	got, err := readEach(data)
	if (err == nil) != (derr == nil) {
		t.Fatalf("ReadEach err %v, Decode err %v", err, derr)
	}
	if derr == nil && !reflect.DeepEqual(got, d.Messages) {
		t.Fatalf("ReadEach gave %d messages %+v\nDecode %d %+v", len(got), got, len(d.Messages), d.Messages)
	}
}

// ReadEach, which keeps only where each record's last version is and
// reads it again for its messages, gives Read's messages in Read's order
// whatever the file does to its records: written again as they stream,
// rewound, replaced all at once, kept in the header, or (the legacy
// document) in its last "messages" array.
func TestReadEachIsRead(t *testing.T) {
	jsonl, err := os.ReadFile("testdata/gemini.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := os.ReadFile("testdata/test_conversation_gemini.json")
	if err != nil {
		t.Fatal(err)
	}
	const (
		h  = `{"sessionId":"s1","projectHash":"p"}` + "\n"
		u1 = `{"id":"u1","type":"user","content":[{"text":"one"}]}` + "\n"
		g1 = `{"id":"g1","type":"gemini","content":"par"}` + "\n"
		g2 = `{"id":"g1","type":"gemini","content":"partial, then whole","toolCalls":[{"id":"c1","name":"ls","args":{},"result":"a b"}]}` + "\n"
		u2 = `{"id":"u2","type":"user","content":"two"}` + "\n"
	)
	tests := []struct{ name, in string }{
		{"the CLI's JSONL", string(jsonl)},
		{"the legacy document", string(legacy)},
		{"an answer written again keeps its place", h + u1 + g1 + u2 + g2},
		{"rewound", h + u1 + g1 + u2 + `{"$rewindTo":"g1"}` + "\n" + `{"id":"u3","type":"user","content":"three"}` + "\n"},
		{"rewound to an unknown record", h + u1 + `{"$rewindTo":"nope"}` + "\n" + u2},
		{"$set replaces all, then one written again", h + u1 + `{"$set":{"messages":[{"id":"u2","type":"user","content":"two"},{"type":"user","content":"no id"},{"id":"g1","type":"gemini","content":"par"}]}}` + "\n" + g2 + u1},
		{"messages in the header", `{"sessionId":"s1","messages":[{"id":"u1","type":"user","content":"one"},{"id":"g1","type":"gemini","content":"par"}]}` + "\n" + g2},
		{"malformed and unknown lines", h + "{{{\n" + u1 + `{"what":1}` + "\n" + `{"id":"g1","type":5}` + "\n" + g1},
		{"the legacy document's last messages array", "{\n" + `"sessionId":"s1","messages":[{"id":"a","type":"user","content":"first"}],` + "\n" + `"messages":[{"id":"b","type":"user","content":"second"},{"type":"user","content":"no id"}]}`},
		{"a legacy document whose messages end null", "{\n" + `"sessionId":"s1","messages":[{"id":"a","type":"user","content":"first"}],"messages":null}`},
		{"nothing usable", "garbage\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { sameAsDecode(t, []byte(tt.in)) })
	}
}

// changing serves data until changed is set, then other.
type changing struct {
	data, other []byte
	changed     bool
}

func (c *changing) ReadAt(p []byte, off int64) (int, error) {
	b := c.data
	if c.changed {
		b = c.other
	}
	return bytes.NewReader(b).ReadAt(p, off)
}

// A file that changes between the two passes is an error, never other
// messages; an error of each stops the read and is ReadEach's. (A user
// text is handed out once the record after it is read: the change is
// found at the third.)
func TestReadEachStops(t *testing.T) {
	in := []byte(`{"sessionId":"s1"}` + "\n" + `{"id":"u1","type":"user","content":"one"}` + "\n" + `{"id":"u2","type":"user","content":"two"}` + "\n" +
		`{"id":"u3","type":"user","content":"three"}` + "\n")
	other := bytes.ReplaceAll(in, []byte(`"u3"`), []byte(`"x9"`))
	c := &changing{data: in, other: other}
	n := 0
	err := Reader{}.ReadEach(c, int64(len(in)), func(transcript.Message) error {
		n++
		c.changed = true
		return nil
	})
	if !errors.Is(err, errChanged) || n != 1 {
		t.Fatalf("changed between passes: err %v after %d messages", err, n)
	}
	stop := errors.New("stop")
	n = 0
	err = Reader{}.ReadEach(bytes.NewReader(in), int64(len(in)), func(transcript.Message) error {
		n++
		return stop
	})
	if err != stop || n != 1 {
		t.Fatalf("each failing: err %v after %d messages", err, n)
	}
}
