package wire

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/transcript"
)

func TestRoundTrip(t *testing.T) {
	code := int32(2)
	now := time.Date(2026, 11, 30, 1, 2, 3, 4, time.UTC)
	tests := []transcript.Message{
		{Seq: 1, ClientID: "a", Kind: transcript.KindUser, Text: "hi", Agent: "claude", Time: now},
		{Kind: transcript.KindAssistant, Text: "yo", Model: "m", Account: "work", NativeID: "n1"},
		{Kind: transcript.KindThinking, Text: "hmm"},
		{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: "c", Name: "Bash", Input: `{"command":"ls"}`}},
		{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "c", Output: "x", IsError: true, ExitCode: &code}},
		{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "c", Output: "no code"}},
		{Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "Now using Codex"},
		{Kind: transcript.KindInternal, Text: "bookkeeping"},
		{Kind: transcript.KindUser, Text: "look", Images: []transcript.Image{{MediaType: "image/png", Data: []byte("\x89PNG")}}},
		{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "c", Output: "shot"},
			Images: []transcript.Image{{MediaType: "image/jpeg", Data: []byte{0xff, 0xd8}}, {MediaType: "image/webp", Data: []byte("RIFF")}}},
	}
	for _, m := range tests {
		got := FromProto(ToProto(m))
		if diff := cmp.Diff(m, got); diff != "" {
			t.Errorf("%s round trip (-want +got):\n%s", m.Kind, diff)
		}
	}
}

func TestWindowsRoundTrip(t *testing.T) {
	reset := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	ws := []quota.Window{
		{Name: "five_hour", UsedPercent: 96.5, WindowMinutes: 300, ResetsAt: reset},
		{Name: "secondary", UsedPercent: 12, WindowMinutes: 7 * 24 * 60},
		{Name: "seven_day_opus", UsedPercent: 40, WindowMinutes: 7 * 24 * 60, Model: "opus"},
	}
	if diff := cmp.Diff(ws, WindowsFromProto(WindowsToProto(ws))); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	if WindowsToProto(nil) != nil || WindowsFromProto(nil) != nil {
		t.Fatal("no windows should stay nil")
	}
}
