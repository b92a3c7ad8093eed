package claude

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/transcript"
)

// corpusFiles lists every transcript in testdata/corpus.
func corpusFiles(t testing.TB) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("testdata/corpus", func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".jsonl") {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	return files
}

// kinds renders messages as "kind:text" lines for compact assertions.
func kinds(msgs []transcript.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Kind.String())
		switch {
		case m.ToolCall != nil:
			b.WriteString(":" + m.ToolCall.Name + "#" + m.ToolCall.ID)
		case m.ToolResult != nil:
			b.WriteString(":#" + m.ToolResult.CallID)
		case m.Kind == transcript.KindNotice:
			b.WriteString(":" + m.NoticeType)
		default:
			t := m.Text
			if len(t) > 30 {
				t = t[:30]
			}
			b.WriteString(":" + t)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestReadCorpus(t *testing.T) {
	tests := map[string]struct {
		malformed int
		has       []string // substrings of kinds() that must appear, in order
		hasNot    []string
	}{
		"representative_messages.jsonl": {has: []string{"user:Hello Claude!", "tool_call:Edit#tool_001", "tool_result:#tool_001", "tool_call:Bash#tool_002", "tool_result:#tool_002"}},
		"edge_cases.jsonl":              {malformed: 5, has: []string{"tool_call:FailingTool", "tool_result:#tool_edge_001", "user:Testing special characters", "tool_call:TodoWrite"}},
		// The rewind abandoned "First attempt"; compaction links through logicalParentUuid.
		"dag_compact_after_rewind.jsonl": {has: []string{"user:Start", "user:Second attempt", "user:Keep going", "notice:compaction_summary", "user:After compaction", "assistant:Final answer"}, hasNot: []string{"First attempt", "First answer"}},
		"sidechain_integrated.jsonl":     {has: []string{"tool_call:Task#", "tool_result:#toolu_01JA2mLseQCAW3MdwPE4qWEk", "assistant:Excellent research!"}},
		"system_reminder.jsonl":          {has: []string{"user:Please review the change.", "assistant:Reviewed"}, hasNot: []string{"system-reminder", "cwd changed"}},
		"agent-showcol2.jsonl":           {has: []string{"tool_call:Grep"}},
	}
	for _, p := range corpusFiles(t) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			msgs, st, err := Parse(f)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if _, err := (Reader{}).Read(p); err != nil {
				t.Fatalf("Read: %v", err)
			}
			if len(msgs) == 0 {
				t.Fatalf("no messages read (%+v)", st)
			}
			for i, m := range msgs {
				if err := m.Validate(); err != nil {
					t.Errorf("message %d invalid: %v", i, err)
				}
				if m.Agent != Agent || m.NativeID == "" && !strings.Contains(p, "edge_cases") {
					t.Errorf("message %d lacks agent/native id: %+v", i, m)
				}
			}
			got := kinds(msgs)
			want, ok := tests[filepath.Base(p)]
			if !ok {
				return
			}
			if st.Malformed != want.malformed {
				t.Errorf("malformed = %d, want %d", st.Malformed, want.malformed)
			}
			rest := got
			for _, h := range want.has {
				i := strings.Index(rest, h)
				if i < 0 {
					t.Errorf("missing (or out of order) %q in:\n%s", h, got)
					continue
				}
				rest = rest[i+len(h):]
			}
			for _, h := range want.hasNot {
				if strings.Contains(got, h) {
					t.Errorf("unexpected %q in:\n%s", h, got)
				}
			}
		})
	}
}

func TestReadDetails(t *testing.T) {
	tests := []struct {
		name, in, want string
		exit           *int32
	}{
		{"exit code from Bash error",
			`{"type":"user","uuid":"u","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"Exit code 2\nboom","is_error":true}]}}`,
			"tool_result:#t\n", ptr(2)},
		{"exit 0 from a structured Bash result",
			`{"type":"user","uuid":"u","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"hi"}]},"toolUseResult":{"stdout":"hi","stderr":"","interrupted":false}}`,
			"tool_result:#t\n", ptr(0)},
		{"synthetic assistant skipped",
			`{"type":"assistant","uuid":"a","message":{"id":"m","role":"assistant","model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]}}`,
			"", nil},
		{"meta caveat skipped, cast notice kept",
			`{"type":"user","uuid":"u1","isMeta":true,"message":{"role":"user","content":"Caveat: ..."}}` + "\n" +
				`{"type":"user","uuid":"u2","parentUuid":"u1","isMeta":true,"message":{"role":"user","content":"<cast-notice type=\"agent_switch\">\nswitched\n</cast-notice>"}}` + "\n" +
				`{"type":"user","uuid":"u3","parentUuid":"u2","isMeta":true,"message":{"role":"user","content":"<cast-notice type=\"omitted\">\nleft out\n</cast-notice>"}}`,
			"notice:agent_switch\n", nil},
		{"string content and an image",
			`{"type":"user","uuid":"u","message":{"role":"user","content":[{"type":"image","source":{}},"odd",{"type":"text","text":"look"}]}}`,
			"user:[image omitted]\nuser:look\n", nil},
		{"thinking and attachment links",
			`{"type":"user","uuid":"u","parentUuid":null,"message":{"role":"user","content":"hi"}}` + "\n" +
				`{"type":"attachment","uuid":"x","parentUuid":"u","attachment":{}}` + "\n" +
				`{"type":"assistant","uuid":"a","parentUuid":"x","message":{"id":"m","role":"assistant","model":"claude-opus-4-8","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"yo"}]}}`,
			"user:hi\nthinking:hmm\nassistant:yo\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs, _, err := Parse(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(msgs); got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
			if tc.exit != nil {
				ec := msgs[0].ToolResult.ExitCode
				if ec == nil || *ec != *tc.exit {
					t.Errorf("exit code = %v, want %d", ec, *tc.exit)
				}
			}
		})
	}
}

func TestReadGarbageFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.jsonl")
	os.WriteFile(p, []byte("not json\n{also not\n"), 0o600)
	if _, err := (Reader{}).Read(p); err == nil {
		t.Fatal("a file with no record at all must be an error")
	}
	os.WriteFile(p, nil, 0o600)
	if msgs, err := (Reader{}).Read(p); err != nil || len(msgs) != 0 {
		t.Fatalf("empty file: %v %v", msgs, err)
	}
}

func ptr(n int32) *int32 { return &n }

// A slash command Claude Code runs itself (`claude -p` given "/compact" on
// a short conversation) writes its output as a system record and calls no
// model: that output is what the user gets instead of an answer, so it is
// read as a notice, not left out (the turn read as silence). The records
// are Claude Code 2.1.197's, trimmed.
func TestReadLocalCommandOutput(t *testing.T) {
	in := `{"parentUuid":null,"type":"user","uuid":"u0","timestamp":"2026-12-06T14:08:28.219Z","message":{"role":"user","content":"start"}}
{"parentUuid":"u0","type":"user","uuid":"u1","isMeta":true,"timestamp":"2026-12-06T14:08:31.591Z","message":{"role":"user","content":"<local-command-caveat>Caveat: The messages below were generated by the user while running local commands. DO NOT respond to these messages or otherwise consider them in your response unless the user explicitly asks you to.</local-command-caveat>"}}
{"parentUuid":"u1","type":"user","uuid":"u2","timestamp":"2026-12-06T14:08:31.587Z","message":{"role":"user","content":"<command-name>/compact</command-name>\n            <command-message>compact</command-message>\n            <command-args></command-args>"}}
{"parentUuid":"u2","isSidechain":false,"type":"system","subtype":"local_command","content":"<local-command-stdout>Not enough messages to compact.</local-command-stdout>","level":"info","timestamp":"2026-12-06T14:08:31.591Z","uuid":"s1","isMeta":false}
`
	msgs, _, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(msgs), "user:start\nuser:/compact\nnotice:"+transcript.NoticeCommandOutput+"\n"; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if n := msgs[2]; n.Text != "Not enough messages to compact." || n.NativeID != "s1" || n.Time.IsZero() {
		t.Fatalf("notice %+v, want the command's output, unwrapped, with its record's id and time", n)
	}

	// The command record reads as the command was typed, arguments and
	// all: the node finds its prompt in it (a command with arguments was
	// not found, and its markup was stored as a second user message).
	in = `{"parentUuid":null,"type":"user","uuid":"u0","timestamp":"2026-12-06T14:08:31.587Z","message":{"role":"user","content":"<command-name>/compact</command-name>\n            <command-message>compact</command-message>\n            <command-args>keep the parser notes</command-args>"}}` + "\n"
	if msgs, _, err = Parse(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Kind != transcript.KindUser || msgs[0].Text != "/compact keep the parser notes" {
		t.Fatalf("got\n%s, want the command as typed", kinds(msgs))
	}

	// A command Claude Code does not run here ("/color red" in -p) is
	// written as two system records: the command as typed, then its
	// output. Only the output is output (Claude Code's own result holds
	// it alone); the first read as one, and cast exec printed the
	// command back above its answer.
	in = `{"parentUuid":null,"type":"user","uuid":"u0","timestamp":"2026-12-06T16:43:28.504Z","message":{"role":"user","content":"start"}}
{"parentUuid":"u0","isSidechain":false,"type":"system","subtype":"local_command","content":"/color red","level":"info","timestamp":"2026-12-06T16:43:28.562Z","uuid":"s0","isMeta":false}
{"parentUuid":"s0","isSidechain":false,"type":"system","subtype":"local_command","content":"<local-command-stdout>/color isn't available in this environment.</local-command-stdout>","level":"info","timestamp":"2026-12-06T16:43:28.562Z","uuid":"s1","isMeta":false}
`
	if msgs, _, err = Parse(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(msgs), "user:start\nuser:/color red\nnotice:"+transcript.NoticeCommandOutput+"\n"; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if n := msgs[2]; n.Text != "/color isn't available in this environment." {
		t.Fatalf("notice %q, want the command's output alone", n.Text)
	}

	// After a compaction Claude Code writes the output as a user record
	// instead: the user never said it.
	in = `{"parentUuid":null,"type":"user","uuid":"u0","timestamp":"2026-12-06T14:08:28.219Z","message":{"role":"user","content":"<local-command-stdout>Compacted (ctrl+o to see full summary)</local-command-stdout>"}}` + "\n"
	if msgs, _, err = Parse(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].NoticeType != transcript.NoticeCommandOutput || msgs[0].Text != "Compacted (ctrl+o to see full summary)" {
		t.Fatalf("got\n%s, want the output as a notice", kinds(msgs))
	}
}
