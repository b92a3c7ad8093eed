package opencode

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/transcript"
)

func TestReadCorpus(t *testing.T) {
	tests := []struct {
		file string
		id   string
		want []string
	}{
		{
			file: "corpus/model-error.jsonl",
			id:   "ses_f34addb6fffeca2UK7PpveGIW3",
			want: []string{"user Say hi!", "user Say hi!", "assistant Hi! How can I help you today?"},
		},
		{
			file: "corpus/question.jsonl",
			id:   "ses_f34687c4effe4c1OUSq8A7KEeN",
			want: []string{
				"user Use your question tool to ask me which color I prefer: red, green or blue. Then tell me what I picked.",
				"thinking The user wants me to use the question tool to ask which color they prefer. Let me do that.",
				`tool_call call_81b04a5712ec4b2ba3045ad5 question {"questions":[{"header":"Favorite color","options":[{"description":"A warm, bold color.","label":"Red"},{"description":"A fresh, natural color.","label":"Green"},{"description":"A calm, cool color.","label":"Blue"}],"question":"Which color do you prefer?"}]}`,
				`tool_result call_81b04a5712ec4b2ba3045ad5 exit=- err=false User has answered your questions: "Which color do you prefer?"="Green". You can now continue with the user's answers in mind.`,
				"thinking The user picked Green. Let me tell them.",
				"assistant You picked **Green** 🌿 — a fresh, natural choice.",
			},
		},
		{
			file: "examples/opencode_export_sample.json",
			id:   "ses_dd5d03327ffeLjgbvMpWhWRKLM",
			want: []string{
				"user NOREPLY-1: imported user turn one",
				"user NOREPLY-2: imported user turn two",
				"user RUN_TOOL: list the files please",
				`tool_call call_fake_3 bash {"command":"echo tool-ran-ok","description":"echo a marker"}`,
				"tool_result call_fake_3 exit=0 err=false tool-ran-ok\n",
				"assistant FAKE-REPLY n=4: saw 6 messages; last user said: RUN_TOOL: list the files please",
			},
		},
		{
			file: "examples/opencode_handwritten_import.json",
			id:   "ses_dd5cb6e7affeOTF71Xuz2X9heu",
			want: []string{
				"user OCIMPORT-U1: create notes.txt",
				"assistant OCIMPORT-A1: created notes.txt",
				"user OCIMPORT-U2: list the directory",
				`tool_call call_imp_1 bash {"command":"ls","description":"list"}`,
				"tool_result call_imp_1 exit=- err=false OCIMPORT-TOOLOUT notes.txt\n",
				"assistant OCIMPORT-A2: the directory has notes.txt",
			},
		},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Parse(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if p.SessionID != tc.id {
				t.Errorf("session %q, want %q", p.SessionID, tc.id)
			}
			if got := brief(p.Messages); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("\n got: %q\nwant: %q", got, tc.want)
			}
			for i, m := range p.Messages {
				if err := m.Validate(); err != nil || m.Agent != Agent || m.NativeID == "" {
					t.Errorf("message %d: %v agent %q native %q", i, err, m.Agent, m.NativeID)
				}
			}
		})
	}
}

// A turn with thinking and parallel tool calls reads in the order it
// happened: per model step the thinking, text and every call the model
// asked for, then the results (in call order), then the next step.
func TestReadParallelCallsWithThinking(t *testing.T) {
	const export = `{"info":{"id":"ses_par","directory":"/w"},"messages":[
 {"info":{"id":"msg_01","role":"user","time":{"created":1000}},"parts":[{"id":"prt_01","type":"text","text":"PAR-U1 check both files"}]},
 {"info":{"id":"msg_02","role":"assistant","modelID":"m1","time":{"created":1100}},"parts":[
  {"id":"prt_02","type":"step-start"},
  {"id":"prt_03","type":"reasoning","text":"PAR-THINK1 read them at once","time":{"start":1110,"end":1120}},
  {"id":"prt_04","type":"text","text":"PAR-A1 reading both","time":{"start":1121,"end":1122}},
  {"id":"prt_05","type":"tool","tool":"read","callID":"call_a","state":{"status":"completed","input":{"filePath":"/w/a"},"output":"PAR-OUT-A","title":"a","metadata":{},"time":{"start":1130,"end":1190}}},
  {"id":"prt_06","type":"tool","tool":"bash","callID":"call_b","state":{"status":"completed","input":{"command":"cat b"},"output":"PAR-OUT-B","title":"b","metadata":{"exit":0},"time":{"start":1131,"end":1150}}},
  {"id":"prt_07","type":"step-finish"}]},
 {"info":{"id":"msg_03","role":"assistant","modelID":"m1","time":{"created":1200}},"parts":[
  {"id":"prt_08","type":"step-start"},
  {"id":"prt_09","type":"reasoning","text":"PAR-THINK2 both read","time":{"start":1210,"end":1220}},
  {"id":"prt_10","type":"text","text":"PAR-A2 a says A, b says B","time":{"start":1221,"end":1230}},
  {"id":"prt_11","type":"step-finish"}]},
 {"info":{"id":"msg_04","role":"assistant","modelID":"m1","time":{"created":1300}},"parts":[
  {"id":"prt_12","type":"reasoning","text":"PAR-THINK3 one more pair","time":{"start":1310,"end":1311}},
  {"id":"prt_13","type":"tool","tool":"bash","callID":"call_c","state":{"status":"completed","input":{"command":"c"},"output":"PAR-OUT-C","title":"c","metadata":{},"time":{"start":1312,"end":1320}}},
  {"id":"prt_14","type":"tool","tool":"bash","callID":"call_d","state":{"status":"error","input":{"command":"d"},"error":"PAR-ERR-D","time":{"start":1313,"end":1321}}},
  {"id":"prt_15","type":"text","text":"PAR-A3 c worked, d failed","time":{"start":1330,"end":1331}}]}
]}`
	p, err := Parse(strings.NewReader(export))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"user PAR-U1 check both files",
		"thinking PAR-THINK1 read them at once",
		"assistant PAR-A1 reading both",
		`tool_call call_a read {"filePath":"/w/a"}`,
		`tool_call call_b bash {"command":"cat b"}`,
		"tool_result call_a exit=- err=false PAR-OUT-A",
		"tool_result call_b exit=0 err=false PAR-OUT-B",
		"thinking PAR-THINK2 both read",
		"assistant PAR-A2 a says A, b says B",
		// No step markers: the text began after both tools ended.
		"thinking PAR-THINK3 one more pair",
		`tool_call call_c bash {"command":"c"}`,
		`tool_call call_d bash {"command":"d"}`,
		"tool_result call_c exit=- err=false PAR-OUT-C",
		"tool_result call_d exit=- err=true PAR-ERR-D",
		"assistant PAR-A3 c worked, d failed",
	}
	if got := brief(p.Messages); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("\n got: %q\nwant: %q", got, want)
	}
	// Times follow the same order: a call is stamped when it started, not
	// when its message was created (before the thinking).
	for i := 1; i < len(p.Messages); i++ {
		if k := p.Messages[i].Kind; k != transcript.KindToolResult && p.Messages[i].Time.Before(p.Messages[i-1].Time) {
			t.Errorf("message %d (%s) is stamped before the one it follows", i, brief(p.Messages[i : i+1])[0])
		}
	}
}

// An image or file attached in OpenCode leaves a placeholder naming it
// (never its data), and parts the reader does not know are counted.
func TestReadAttachmentsAndUnknownParts(t *testing.T) {
	const export = `{"info":{"id":"ses_att","directory":"/w"},"messages":[
 {"info":{"id":"msg_01","role":"user","time":{"created":1000}},"parts":[
  {"id":"prt_01","type":"text","text":"ATT-U1 what is wrong in this screenshot and notes?"},
  {"id":"prt_02","type":"file","mime":"image/png","filename":"crash.png","url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="},
  {"id":"prt_03","type":"file","mime":"text/plain","filename":"notes.txt","url":"file:///w/notes.txt"},
  {"id":"prt_04","type":"file","url":"data:application/octet-stream;base64,AAAA"},
  {"id":"prt_05","type":"agent","name":"explore"}]},
 {"info":{"id":"msg_02","role":"assistant","modelID":"m1","time":{"created":1100}},"parts":[
  {"id":"prt_06","type":"step-start"},
  {"id":"prt_07","type":"text","text":"ATT-A1 a nil map","time":{"start":1110,"end":1111}},
  {"id":"prt_08","type":"hologram","data":{}},
  {"id":"prt_09","type":"patch","hash":"abc","files":["/w/a.go"]},
  {"id":"prt_10","type":"step-finish"}]}
]}`
	p, err := Parse(strings.NewReader(export))
	if err != nil {
		t.Fatal(err)
	}
	// The screenshot, a data URL, rides with the text it was sent with;
	// a file by reference and data of no image type keep a placeholder.
	want := []string{
		"user ATT-U1 what is wrong in this screenshot and notes?",
		"user [file omitted: notes.txt, text/plain]",
		"user [file omitted]",
		"assistant ATT-A1 a nil map",
	}
	if got := brief(p.Messages); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("\n got: %q\nwant: %q", got, want)
	}
	if want := map[string]int{"agent part": 1, "hologram part": 1}; !reflect.DeepEqual(map[string]int(p.Kinds), want) {
		t.Errorf("skipped %v, want %v", p.Kinds, want)
	}
	for _, m := range p.Messages {
		if strings.Contains(m.Text, "base64") || strings.Contains(m.Text, "iVBOR") {
			t.Errorf("attachment data in %q", m.Text)
		}
	}
	if im := p.Messages[0].Images; len(im) != 1 || im[0].MediaType != "image/png" {
		t.Errorf("the screenshot: %+v, want one PNG on the user text", im)
	}
}

func TestReadShapes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
		err  bool
	}{
		{
			name: "log line before the export, error tool, notice, compaction summary",
			in: `Exporting session: ses_1
{"info":{"id":"ses_1"},"messages":[
 {"info":{"id":"msg_1","role":"user"},"parts":[{"id":"prt_1","type":"text","text":"<cast_notice type=\"merge\">\nmerged\n</cast_notice>","synthetic":true},{"id":"prt_2","type":"text","text":"hi"},{"id":"prt_3","type":"text","text":"skip me","ignored":true}]},
 {"info":{"id":"msg_2","role":"assistant","modelID":"m1"},"parts":[{"id":"prt_4","type":"step-start"},{"id":"prt_5","type":"tool","tool":"bash","callID":"c1","state":{"status":"error","input":{"command":"false"},"error":"boom","metadata":{"exit":1}}},{"id":"prt_6","type":"tool","tool":"read","callID":"c2","state":{"status":"running","input":{}}}]},
 {"info":{"id":"msg_3","role":"assistant","summary":true},"parts":[{"id":"prt_7","type":"text","text":"summary so far"}]}
]}`,
			want: []string{"notice merge merged", "user hi", `tool_call c1 bash {"command":"false"}`, "tool_call c2 read {}", "tool_result c1 exit=1 err=true boom", "notice compaction_summary summary so far"},
		},
		{
			name: "rows with a garbage line",
			in: `{"row":{"id":"ses_2"},"table":"session_v2"}
not json
{"row":{"id":"m2","seq":2,"type":"assistant","data":{"content":[{"type":"tool","id":"c1","name":"bash","state":{"status":"completed","input":{"command":"ls"},"content":[{"type":"text","text":"a\n"}],"metadata":{"exit":0}}}]}},"table":"session_message"}
{"row":{"id":"m1","seq":1,"type":"user","data":{"text":"list"}},"table":"session_message"}`,
			want: []string{"user list", `tool_call c1 bash {"command":"ls"}`, "tool_result c1 exit=0 err=false a\n"},
		},
		{
			name: "a call whose input is still streaming (pending) waits",
			in: `{"info":{"id":"ses_3"},"messages":[
 {"info":{"id":"msg_1","role":"user"},"parts":[{"id":"prt_1","type":"text","text":"list"}]},
 {"info":{"id":"msg_2","role":"assistant","modelID":"m1"},"parts":[{"id":"prt_2","type":"step-start"},{"id":"prt_3","type":"tool","tool":"bash","callID":"c1","state":{"status":"pending","input":{},"raw":"{\"comm"}}]}
]}`,
			want: []string{"user list"},
		},
		{name: "garbage", in: "nothing here\n", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(strings.NewReader(tc.in))
			if (err != nil) != tc.err {
				t.Fatalf("err %v", err)
			}
			if got := brief(p.Messages); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("\n got: %q\nwant: %q", got, tc.want)
			}
		})
	}
}

// FuzzParse must never panic and only yield valid messages; seeds are every
// file in testdata.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.json*")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, _ := Parse(bytes.NewReader(data))
		for i, m := range p.Messages {
			if err := m.Validate(); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if m.Kind == transcript.KindUnspecified {
				t.Fatalf("message %d has no kind", i)
			}
		}
	})
}

// Adoption exports a session of the user's own OpenCode while its turn
// still streams (a listing every 15 s at most): OpenCode writes a text or
// reasoning part at every delta, its time.end and the message's
// time.completed only once it is done. A part still streaming is read
// once it ended (or its message did: an interrupted turn), so each message
// read mid-turn is one the finished session holds too; before, the half
// text was read, and adoption kept it beside the finished one (another
// digest).
func TestReadSkipsPartsStillStreaming(t *testing.T) {
	const head = `{"info":{"id":"ses_str","directory":"/w"},"messages":[
 {"info":{"id":"msg_01","role":"user","time":{"created":1000}},"parts":[{"id":"prt_01","type":"text","text":"STR-U1 plan the fix"}]},
 {"info":{"id":"msg_02","role":"assistant","modelID":"m1","time":{"created":1100,"completed":1190}},"parts":[
  {"id":"prt_02","type":"step-start"},
  {"id":"prt_03","type":"tool","tool":"read","callID":"call_a","state":{"status":"completed","input":{"filePath":"/w/a"},"output":"STR-OUT-A","title":"a","metadata":{},"time":{"start":1130,"end":1140}}},
  {"id":"prt_04","type":"step-finish"}]},
 {"info":{"id":"msg_03","role":"assistant","modelID":"m1","time":{"created":1200%s}},"parts":[
  {"id":"prt_05","type":"step-start"},
  %s]}
]}`
	stages := []struct{ name, completed, parts string }{
		{"thinking", "", `{"id":"prt_06","type":"reasoning","text":"STR-THINK the file","time":{"start":1210}}`},
		{"answering", "", `{"id":"prt_06","type":"reasoning","text":"STR-THINK the file reads a","time":{"start":1210,"end":1220}},
  {"id":"prt_07","type":"text","text":"STR-A1 The fix:\n1. read","time":{"start":1221}}`},
		{"interrupted", `,"completed":1250`, `{"id":"prt_06","type":"reasoning","text":"STR-THINK the file reads a","time":{"start":1210,"end":1220}},
  {"id":"prt_07","type":"text","text":"STR-A1 The fix:\n1. read","time":{"start":1221}}`},
		{"done", `,"completed":1250`, `{"id":"prt_06","type":"reasoning","text":"STR-THINK the file reads a","time":{"start":1210,"end":1220}},
  {"id":"prt_07","type":"text","text":"STR-A1 The fix:\n1. read a\n2. change it","time":{"start":1221,"end":1240}},
  {"id":"prt_08","type":"step-finish"}`},
	}
	read := func(completed, parts string) []string {
		t.Helper()
		p, err := Parse(strings.NewReader(fmt.Sprintf(head, completed, parts)))
		if err != nil {
			t.Fatal(err)
		}
		return brief(p.Messages)
	}
	before := []string{"user STR-U1 plan the fix", `tool_call call_a read {"filePath":"/w/a"}`, "tool_result call_a exit=- err=false STR-OUT-A"}
	want := map[string][]string{
		"thinking":    before,
		"answering":   append(slices.Clone(before), "thinking STR-THINK the file reads a"),
		"interrupted": append(slices.Clone(before), "thinking STR-THINK the file reads a", "assistant STR-A1 The fix:\n1. read"),
		"done":        append(slices.Clone(before), "thinking STR-THINK the file reads a", "assistant STR-A1 The fix:\n1. read a\n2. change it"),
	}
	for _, st := range stages {
		if got := read(st.completed, st.parts); !slices.Equal(got, want[st.name]) {
			t.Errorf("%s:\n got: %q\nwant: %q", st.name, got, want[st.name])
		}
	}
}
