package wire

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
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

// A reader takes the *_time fields, and the deprecated ones an older
// control plane sends alone (AIP-142's renames, both filled meanwhile).
func TestTimeFieldsFallBackToDeprecated(t *testing.T) {
	old, cur := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	tsOld, tsCur := timestamppb.New(old), timestamppb.New(cur)
	accounts := []struct {
		name string
		acc  *castv1.Account
		want *timestamppb.Timestamp
	}{
		{"new only", &castv1.Account{LimitEndTime: tsCur}, tsCur},
		{"both", &castv1.Account{LimitEndTime: tsCur, LimitedUntil: tsOld}, tsCur},
		{"older control plane", &castv1.Account{LimitedUntil: tsOld}, tsOld},
		{"not limited", &castv1.Account{}, nil},
	}
	for _, tc := range accounts {
		if got := LimitEndTime(tc.acc); got != tc.want {
			t.Errorf("LimitEndTime, %s: %v, want %v", tc.name, got, tc.want)
		}
	}
	choices := []struct {
		name             string
		c                *castv1.AccountChoice
		wantEnd, wantAsk time.Time
	}{
		{"new only", &castv1.AccountChoice{LimitEndTime: tsCur, CreateTime: tsOld}, cur, old},
		{"both", &castv1.AccountChoice{LimitEndTime: tsCur, Until: tsOld, CreateTime: tsCur, Since: tsOld}, cur, cur},
		{"older control plane", &castv1.AccountChoice{Until: tsOld, Since: tsCur}, old, cur},
	}
	for _, tc := range choices {
		end, ask := ChoiceTimes(tc.c)
		if !end.Equal(tc.wantEnd) || !ask.Equal(tc.wantAsk) {
			t.Errorf("ChoiceTimes, %s: %v, %v; want %v, %v", tc.name, end, ask, tc.wantEnd, tc.wantAsk)
		}
	}
}
