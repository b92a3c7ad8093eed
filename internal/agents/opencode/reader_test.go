package opencode

import (
	"bytes"
	"os"
	"path/filepath"
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
			want: []string{"notice merge merged", "user hi", `tool_call c1 bash {"command":"false"}`, "tool_result c1 exit=1 err=true boom", "tool_call c2 read {}", "notice compaction_summary summary so far"},
		},
		{
			name: "rows with a garbage line",
			in: `{"row":{"id":"ses_2"},"table":"session_v2"}
not json
{"row":{"id":"m2","seq":2,"type":"assistant","data":{"content":[{"type":"tool","id":"c1","name":"bash","state":{"status":"completed","input":{"command":"ls"},"content":[{"type":"text","text":"a\n"}],"metadata":{"exit":0}}}]}},"table":"session_message"}
{"row":{"id":"m1","seq":1,"type":"user","data":{"text":"list"}},"table":"session_message"}`,
			want: []string{"user list", `tool_call c1 bash {"command":"ls"}`, "tool_result c1 exit=0 err=false a\n"},
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
