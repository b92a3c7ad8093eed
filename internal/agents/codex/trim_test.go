package codex

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cast-dev/cast/internal/transcript"
)

// turns builds n user/assistant pairs with seqs 1..2n and texts of size bytes.
func turns(n, size int) []transcript.Message {
	var msgs []transcript.Message
	for i := 0; i < n; i++ {
		u := user(fmt.Sprintf("u%d %s", i, strings.Repeat("x", size)))
		a := asst(fmt.Sprintf("a%d %s", i, strings.Repeat("y", size)))
		u.Seq, a.Seq = int64(2*i+1), int64(2*i+2)
		msgs = append(msgs, u, a)
	}
	return msgs
}

var noteRE = regexp.MustCompile(`^developer: \[cast\] The (\d+) earliest messages of this conversation \(seq (\d+)-(\d+)\) are left out here to fit Codex's history limit\. Read them with: cast read ses-test-1 (\d+):(\d+)$`)

func TestTrimThresholds(t *testing.T) {
	const noBytesCap = 1 << 40
	tests := []struct {
		name        string
		msgs        []transcript.Message
		maxBytes    int // 0: the real cap, through Writer.Write
		wantOmitted int
		firstKept   string // prefix of the first kept user text
	}{
		{name: "exactly 4096 items fit", msgs: turns(2048, 1), maxBytes: noBytesCap},
		{name: "4098 items drop two turns (cuts land on a user turn)", msgs: turns(2049, 1), maxBytes: noBytesCap, wantOmitted: 4, firstKept: "u2 "},
		{name: "4097 items drop the first turn (the note takes a slot)", msgs: append(turns(2048, 1), user("last")), maxBytes: noBytesCap, wantOmitted: 2, firstKept: "u1 "},
		{name: "bytes under 240 KB fit", msgs: turns(12, 10_000)},
		{name: "bytes over 240 KB drop the oldest turns", msgs: turns(20, 10_000), wantOmitted: 16, firstKept: "u8 "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var items []string
			var omitted, size int
			if tc.maxBytes == 0 {
				w, err := Writer{Now: fixedNow}.Write(target(t), tc.msgs)
				if err != nil {
					t.Fatal(err)
				}
				items, omitted = modelItems(t, w.Path), w.Omitted
				for _, e := range readLines(t, w.Path) {
					if e.Type == lineResponseItem {
						size += len(e.Payload)
					}
				}
			} else {
				lines, om := buildCapped(prepare(tc.msgs, "ses-test-1"), "ses-test-1", MaxItems, tc.maxBytes)
				omitted = om
				for _, l := range lines {
					if l.isModelItem() {
						var it item
						_ = json.Unmarshal(l.payload, &it)
						items = append(items, it.Role+": "+textOf(it.Content))
					}
				}
			}
			if omitted != tc.wantOmitted {
				t.Fatalf("omitted %d, want %d", omitted, tc.wantOmitted)
			}
			n := len(items)
			if n > MaxItems || size > MaxBytes {
				t.Fatalf("over the caps: %d items, %d bytes", n, size)
			}
			if tc.wantOmitted == 0 {
				if n != len(tc.msgs) {
					t.Errorf("%d items for %d messages", n, len(tc.msgs))
				}
				return
			}
			m := noteRE.FindStringSubmatch(items[0])
			if m == nil {
				t.Fatalf("first item is not the trim note: %q", items[0])
			}
			want := []string{fmt.Sprint(tc.wantOmitted), "1", fmt.Sprint(tc.wantOmitted), "1", fmt.Sprint(tc.wantOmitted)}
			if strings.Join(m[1:], ",") != strings.Join(want, ",") {
				t.Errorf("note counts/ranges %v, want %v", m[1:], want)
			}
			if !strings.HasPrefix(items[1], "user: "+tc.firstKept) {
				t.Errorf("first kept item %.20q, want user %q", items[1], tc.firstKept)
			}
			if len(items) != 1+len(tc.msgs)-tc.wantOmitted {
				t.Errorf("%d items, want note + %d", len(items), len(tc.msgs)-tc.wantOmitted)
			}
		})
	}
}

func TestTrimCutsAtATurnSoPairsStay(t *testing.T) {
	// One huge first turn forces a cut inside a tool block; the cut must
	// move to the next user message rather than orphan the result.
	msgs := []transcript.Message{user("first")}
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs, call(id, "exec_command", `{"cmd":"x"}`), result(id, strings.Repeat("o", 9_000), nil))
	}
	msgs = append(msgs, user("second"), asst("done"))
	w, err := Writer{Now: fixedNow}.Write(target(t), msgs)
	if err != nil {
		t.Fatal(err)
	}
	items := modelItems(t, w.Path)
	if w.Omitted != 61 || len(items) != 3 || items[1] != "user: second" {
		t.Fatalf("omitted %d, items %.60q", w.Omitted, items)
	}
}

func TestClipOversizedItems(t *testing.T) {
	big := strings.Repeat("é", 20_000) // 40 KB, two bytes a rune
	huge := big + big + big + big      // 160 KB: more than one item may take
	msgs := []transcript.Message{
		user("start"),
		call("c1", "exec_command", `{"cmd":"cat huge"}`),
		result("c1", "HEAD"+huge+"TAIL", i32(0)),
		asst("A-HEAD" + big + "A-TAIL"),
	}
	msgs[2].Seq, msgs[3].Seq = 7, 8
	w, err := Writer{Now: fixedNow}.Write(target(t), msgs)
	if err != nil {
		t.Fatal(err)
	}
	items := modelItems(t, w.Path)
	out, text := items[2], items[3]
	if !strings.Contains(out, "cast read ses-test-1 7:7") || !strings.HasPrefix(out, "function_call_output c1 Process exited with code 0\nOutput:\nHEAD") || !strings.HasSuffix(out, "TAIL") {
		t.Errorf("tool output not clipped with a pointer: %.120q ... %q", out, out[len(out)-20:])
	}
	if len(out) > MaxItemBytes+200 || !utf8.ValidString(out) {
		t.Errorf("clipped output is %d bytes, valid utf8 %v", len(out), utf8.ValidString(out))
	}
	if text != "assistant: A-HEAD"+big+"A-TAIL" {
		t.Errorf("a 40 KB assistant text was changed: %d bytes", len(text))
	}
	// Without seqs the pointer uses the position in the given slice.
	msgs[2].Seq = 0
	w, _ = Writer{Now: fixedNow}.Write(target(t), msgs)
	if items := modelItems(t, w.Path); !strings.Contains(items[2], "cast read ses-test-1 3:3") {
		t.Errorf("pointer without seq: %.200q", items[2])
	}
}

// Texts well below the caps are written whole, however long: a 50 KB shell
// output, user paste and tool input lose nothing (Codex applies its own
// output truncation on resume; cutting first would lose the middle for good).
func TestLongItemsBelowCapsStayWhole(t *testing.T) {
	long := numberedOutput(50 * 1024)
	input := `{"cmd":"printf '` + strings.Repeat("i", 50*1024) + `'"}`
	msgs := []transcript.Message{
		user("PASTE " + long),
		call("c1", "exec_command", input),
		result("c1", long, i32(0)),
		asst("done"),
	}
	w, err := Writer{Now: fixedNow}.Write(target(t), msgs)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Reader{}.Read(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	if w.Omitted != 0 || len(back) != 4 {
		t.Fatalf("omitted %d, read back %d messages", w.Omitted, len(back))
	}
	if back[0].Text != "PASTE "+long {
		t.Errorf("user text changed: %d of %d bytes", len(back[0].Text), len("PASTE "+long))
	}
	if back[1].ToolCall == nil || !strings.Contains(back[1].ToolCall.Input, strings.Repeat("i", 50*1024)) {
		t.Errorf("tool input changed")
	}
	if back[2].ToolResult == nil || !strings.HasSuffix(back[2].ToolResult.Output, "\n"+long) {
		t.Errorf("tool output changed: got %d of %d bytes", len(back[2].ToolResult.Output), len(long))
	}
}
