package msgspool

import (
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

var _ agents.MessageSource = (*Spool)(nil)

func sample() []transcript.Message {
	code := int32(2)
	at := time.Date(2026, 3, 4, 5, 6, 7, 890123456, time.UTC)
	return []transcript.Message{
		{Seq: 1, Kind: transcript.KindUser, Text: "look at this", Images: []transcript.Image{{MediaType: "image/png", Data: []byte("\x89PNG\x00\xff")}}, Time: at},
		{Seq: 2, Kind: transcript.KindAssistant, Text: "ok", Agent: "gemini", Model: "gemini-2.5-pro", Account: "a", NativeID: "n1"},
		{Seq: 3, Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: "c1", Name: "shell", Input: `{"cmd":"ls"}`}},
		{Seq: 4, Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "c1", Output: string(make([]byte, 300<<10)), IsError: true, ExitCode: &code}},
		{Seq: 5, ClientID: "k", Kind: transcript.KindNotice, NoticeType: transcript.NoticeCompactionSummary, Text: "so far"},
	}
}

func spooled(t *testing.T, msgs []transcript.Message) *Spool {
	t.Helper()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, m := range msgs {
		if err := s.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// What is added reads back the same, in order, walked twice and each
// message again by its position.
func TestSpoolReadsBackWhatWasAdded(t *testing.T) {
	for name, msgs := range map[string][]transcript.Message{"empty": nil, "sample": sample()} {
		t.Run(name, func(t *testing.T) {
			s := spooled(t, msgs)
			if s.Len() != len(msgs) {
				t.Fatalf("Len %d, want %d", s.Len(), len(msgs))
			}
			for range 2 {
				got, err := agents.Collect(s)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(msgs) || (len(msgs) > 0 && !reflect.DeepEqual(got, msgs)) {
					t.Fatalf("read back %+v, want %+v", got, msgs)
				}
			}
			var i int
			if err := s.Each(func(pos int64, m *transcript.Message) error {
				at, err := s.At(pos)
				if err != nil {
					return err
				}
				if !reflect.DeepEqual(at, msgs[i]) {
					t.Errorf("At(%d) = %+v, want %+v", pos, at, msgs[i])
				}
				i++
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The file is private and its name gone from the start: a cast killed
// mid-restore leaves no copy of the conversation in the folder.
func TestSpoolLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(sample()[0]); err != nil {
		t.Fatal(err)
	}
	fi, err := s.f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("spool mode %v, want 0600", fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the spool's folder holds %v while it is open", ents)
	}
	if _, err := agents.Collect(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// A spool cut short (the disk filled) is an error, never fewer messages.
func TestSpoolCutShortFails(t *testing.T) {
	s := spooled(t, sample())
	var last int64 // the record that will be cut
	if err := s.Each(func(pos int64, _ *transcript.Message) error { last = pos; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.f.Truncate(s.size - 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Each(func(int64, *transcript.Message) error { return nil }); err == nil {
		t.Fatal("read a truncated spool without an error")
	}
	if _, err := s.At(last); err == nil {
		t.Fatal("At read the cut record without an error")
	}
	stop := errors.New("stop")
	if err := s.Each(func(int64, *transcript.Message) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Each returned %v, want each's error", err)
	}
}
