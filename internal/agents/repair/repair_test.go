package repair

import (
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/transcript"
)

func call(id string) transcript.Message {
	return transcript.Message{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: id, Name: "ls"}}
}

func result(id string) transcript.Message {
	return transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: "ok"}}
}

func TestUniqueCallIDs(t *testing.T) {
	in := []transcript.Message{call("a"), result("a"), call("a"), result("a")}
	got := UniqueCallIDs(in)
	if got[2].ToolCall.ID != "a_cast2" || got[3].ToolResult.CallID != "a_cast2" {
		t.Fatalf("second call and result = %q, %q, want a_cast2", got[2].ToolCall.ID, got[3].ToolResult.CallID)
	}
	if got[0].ToolCall.ID != "a" || got[1].ToolResult.CallID != "a" {
		t.Fatalf("first call and result renamed: %q, %q", got[0].ToolCall.ID, got[1].ToolResult.CallID)
	}
	if in[2].ToolCall.ID != "a" || in[3].ToolResult.CallID != "a" {
		t.Fatal("input modified")
	}
	plain := []transcript.Message{call("a"), result("a"), call("b"), result("b")}
	if out := UniqueCallIDs(plain); &out[0] != &plain[0] {
		t.Fatal("no repeated id, yet a copy was made")
	}
}

func TestIndexCalls(t *testing.T) {
	first, second := result("a"), result("a")
	second.ToolResult.Output = "again"
	results, calls := IndexCalls([]transcript.Message{call("a"), first, second, result("orphan")})
	if !calls["a"] || calls["orphan"] {
		t.Fatalf("calls = %v", calls)
	}
	if results["a"].Output != "ok" || results["orphan"] == nil {
		t.Fatalf("results = %v", results)
	}
}

func TestStableUUID(t *testing.T) {
	a, b := StableUUID("pi:s1"), StableUUID("pi:s1")
	if a != b || a == StableUUID("pi:s2") {
		t.Fatalf("not stable per seed: %s %s", a, b)
	}
	if len(a) != 36 || a[14] != '5' || !strings.ContainsAny(a[19:20], "89ab") {
		t.Fatalf("not a version-5-style UUID: %s", a)
	}
}

// ToolName and FunctionChars map by rune (a multi-byte rune, or a byte
// that is not UTF-8, is one "_"); FunctionChars keeps an empty name empty,
// for each writer to name.
func TestToolName(t *testing.T) {
	for _, tc := range []struct{ in, name, chars string }{
		{"Bash", "Bash", "Bash"},
		{"mcp.server:tool", "mcp_server_tool", "mcp_server_tool"},
		{"", "unknown_tool", ""},
		{strings.Repeat("x", 100), strings.Repeat("x", 64), strings.Repeat("x", 64)},
		{"h\u00e9llo\xff", "h_llo_", "h_llo_"},
		{strings.Repeat("\u00e9", 70), strings.Repeat("_", 64), strings.Repeat("_", 64)},
	} {
		if got := ToolName(tc.in); got != tc.name {
			t.Errorf("ToolName(%q) = %q, want %q", tc.in, got, tc.name)
		}
		if got := FunctionChars(tc.in, "_-"); got != tc.chars {
			t.Errorf("FunctionChars(%q) = %q, want %q", tc.in, got, tc.chars)
		}
	}
}

func TestArgsObject(t *testing.T) {
	for in, want := range map[string]string{
		"":             `{}`,
		` { "a": 1 } `: `{"a":1}`,
		`[1,2]`:        `{"input":[1,2]}`,
		`"text"`:       `{"input":"text"}`,
		`not json`:     `{"input":"not json"}`,
	} {
		if got := string(ArgsObject(in)); got != want {
			t.Errorf("ArgsObject(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestWritable(t *testing.T) {
	msgs := []transcript.Message{
		{Kind: transcript.KindUser, Text: "one"},
		{Kind: transcript.KindInternal, Text: "bookkeeping"},
		{Kind: transcript.KindToolCall}, // no call: invalid
		call("c1"),
		{Kind: transcript.KindAssistant, Text: "two"},
	}
	for _, tc := range []struct {
		name   string
		stopAt int // stop after this many (0: never)
		want   []string
	}{
		{"every renderable valid message, in order", 0, []string{"user one", "tool_call c1", "assistant two"}},
		{"a loop that stops early", 2, []string{"user one", "tool_call c1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for m := range Writable(msgs) {
				s := m.Kind.String() + " " + m.Text
				if m.ToolCall != nil {
					s = m.Kind.String() + " " + m.ToolCall.ID
				}
				got = append(got, s)
				if len(got) == tc.stopAt {
					break
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("Writable yielded %q, want %q", got, tc.want)
			}
		})
	}
}
