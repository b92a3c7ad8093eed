package gemini

import (
	"bytes"
	"os"
	"testing"
)

// FuzzDecode checks that no input makes the reader panic or return a
// message that breaks the neutral model's rules, and that ReadEach gives
// the same messages.
func FuzzDecode(f *testing.F) {
	legacy, err := os.ReadFile("testdata/test_conversation_gemini.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(legacy)
	// The 134 KB JSONL sample slows the fuzzer to a crawl as one input, so
	// each of its records is a seed of its own, behind the header.
	log, err := os.ReadFile("testdata/gemini.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	lines := bytes.Split(log, []byte("\n"))
	for _, l := range lines[1:] {
		if len(l) > 0 && len(l) < 16<<10 {
			f.Add(append(append(append([]byte(nil), lines[0]...), '\n'), l...))
		}
	}
	f.Add([]byte(`{"sessionId":"s","projectHash":"h"}` + "\n" + `{"id":"a","type":"gemini","content":[{"functionCall":{"id":"c","name":"n"}}]}` + "\n" + `{"$rewindTo":"a"}`))
	f.Add([]byte(`{"$set":{"messages":[{"id":"u","type":"user","content":{"text":"\\/x"}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsDecode(t, data)
		d, err := Decode(data)
		if err != nil {
			return
		}
		for i, m := range d.Messages {
			if err := m.Validate(); err != nil {
				t.Fatalf("message %d invalid: %v", i, err)
			}
		}
	})
}

// FuzzEscape checks that escaped text always survives the CLI's filter and
// unescapes to the original.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "/x", "?", `\/x`, "hi", " <session_context>", "\ufeff/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if cliIgnores(e) {
			t.Fatalf("Escape(%q) = %q is still ignored", s, e)
		}
		if Unescape(e) != s {
			t.Fatalf("Unescape(Escape(%q)) = %q", s, Unescape(e))
		}
	})
}
