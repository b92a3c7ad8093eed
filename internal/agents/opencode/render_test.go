package opencode

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

var (
	fixedNow  = time.Date(2026, 11, 30, 3, 4, 5, 0, time.UTC)
	fakeModel = ModelRef{ProviderID: "fake", ModelID: "fake-model"}
	tgt       = agents.Target{Home: "/h", Cwd: "/work/p", SessionID: "ses-test"}
)

func i32(n int32) *int32 { return &n }

func user(s string) transcript.Message { return transcript.Message{Kind: transcript.KindUser, Text: s} }
func asst(s string) transcript.Message {
	return transcript.Message{Kind: transcript.KindAssistant, Text: s}
}
func call(id, name, in string) transcript.Message {
	return transcript.Message{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: id, Name: name, Input: in}}
}
func result(id, out string, exit *int32) transcript.Message {
	return transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: out, ExitCode: exit}}
}

// layout renders an export as role[parts] lines.
func layout(ex Export) []string {
	var out []string
	for _, m := range ex.Messages {
		var ps []string
		for _, p := range m.Parts {
			switch p.Type {
			case "tool":
				s := fmt.Sprintf("tool %s %s %s %s", p.CallID, p.Tool, p.State.Input, p.State.Status)
				if p.State.Status == "completed" {
					s += " " + p.State.Output
				} else {
					s += " " + p.State.Error
				}
				ps = append(ps, s)
			default:
				syn := ""
				if p.Synthetic {
					syn = "(synthetic)"
				}
				ps = append(ps, p.Type+syn+" "+p.Text)
			}
		}
		out = append(out, m.Info.Role+"["+strings.Join(ps, " | ")+"]")
	}
	return out
}

func TestRender(t *testing.T) {
	lead := "user[text(synthetic) " + kit.CastNotice.Wrap(transcript.NoticeHandoff, LeadIn) + "]"
	tests := []struct {
		name string
		msgs []transcript.Message
		want []string
	}{
		{
			name: "turns with a paired call; text after a tool starts a new step",
			msgs: []transcript.Message{user("u1"), asst("a1"), call("c1", "bash", `{"command":"ls"}`), result("c1", "x", i32(0)), asst("a2")},
			want: []string{"user[text u1]", `assistant[text a1 | tool c1 bash {"command":"ls"} completed x]`, "assistant[text a2]"},
		},
		{
			name: "a picture pasted alone is a user message of its own, with no empty text",
			msgs: []transcript.Message{{Kind: transcript.KindUser, Images: []transcript.Image{{MediaType: "image/png", Data: []byte("\x89PNG")}}}, user("u"), asst("a")},
			want: []string{"user[file ]", "user[text u]", "assistant[text a]"},
		},
		{
			name: "codex exec_command and claude Bash become bash",
			msgs: []transcript.Message{user("u"), call("c1", "exec_command", `{"cmd":"echo hi","workdir":"/w"}`), result("c1", "hi", nil),
				call("toolu_2", "Bash", `{"command":"pwd","description":"where"}`), result("toolu_2", "/w", nil)},
			// One call after another's result: two steps, as OpenCode records them.
			want: []string{"user[text u]", `assistant[tool c1 bash {"command":"echo hi","workdir":"/w"} completed hi]`, `assistant[tool toolu_2 bash {"command":"pwd","description":"where"} completed /w]`},
		},
		{
			name: "free-form and odd tool input, unsafe names",
			msgs: []transcript.Message{user("u"), call("c1", "apply_patch", `"*** Begin Patch"`), result("c1", "Done!", nil), call("c2", "mcp:srv.tool", "not json"), result("c2", "ok", nil)},
			want: []string{"user[text u]", `assistant[tool c1 apply_patch {"input":"*** Begin Patch"} completed Done!]`, `assistant[tool c2 mcp_srv_tool {"input":"not json"} completed ok]`},
		},
		{
			name: "parallel calls share a step; a call after their results starts the next",
			msgs: []transcript.Message{user("u"), call("c1", "x", `{}`), call("c2", "y", `{}`), result("c1", "one", nil), result("c2", "two", nil), call("c3", "z", `{}`), result("c3", "three", nil)},
			want: []string{"user[text u]", "assistant[tool c1 x {} completed one | tool c2 y {} completed two]", "assistant[tool c3 z {} completed three]"},
		},
		{
			name: "orphans: call without result is an error, result without call gets a call",
			msgs: []transcript.Message{user("u"), call("c1", "read", `{}`), user("u2"), result("c9", "out", nil)},
			want: []string{"user[text u]", "assistant[tool c1 read {} error " + OrphanCallOutput + "]", "user[text u2]",
				`assistant[tool c9 ` + OrphanResultName + ` {"note":"this tool call was not recorded in the transcript; only its result was"} completed out]`},
		},
		{
			name: "late result pairs with its call, result before call places the call",
			msgs: []transcript.Message{user("u"), call("c1", "x", `{}`), user("u2"), result("c1", "late", nil), result("c2", "early", nil), call("c2", "y", `{}`)},
			want: []string{"user[text u]", "assistant[tool c1 x {} completed late]", "user[text u2]", "assistant[tool c2 y {} completed early]"},
		},
		{
			name: "call ids repeated across turns stay paired",
			msgs: []transcript.Message{user("u"), call("call_0", "x", `{}`), result("call_0", "r1", nil), user("u2"), call("call_0", "y", `{}`), result("call_0", "r2", nil)},
			want: []string{"user[text u]", "assistant[tool call_0 x {} completed r1]", "user[text u2]", "assistant[tool call_0_cast2 y {} completed r2]"},
		},
		{
			name: "error result, notice, internal and thinking left out, assistant first",
			msgs: []transcript.Message{
				asst("hello first"),
				{Kind: transcript.KindInternal, Text: "SECRET"},
				{Kind: transcript.KindThinking, Text: "THOUGHT"},
				{Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "codex -> opencode"},
				call("c1", "bash", `{"command":"false"}`),
				{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "c1", Output: "failed", IsError: true, ExitCode: i32(1)}},
			},
			want: []string{lead, "assistant[text hello first]", "user[text(synthetic) " + kit.CastNotice.Wrap("agent_switch", "codex -> opencode") + "]",
				`assistant[tool c1 bash {"command":"false"} error failed]`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex, err := Render(tgt, tc.msgs, RenderOptions{Model: fakeModel, Now: fixedNow})
			if err != nil {
				t.Fatal(err)
			}
			if got := layout(ex); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("\n got: %q\nwant: %q", got, tc.want)
			}
			doc := string(marshal(ex))
			if strings.Contains(doc, "SECRET") || strings.Contains(doc, "THOUGHT") {
				t.Error("internal row or thinking written")
			}
		})
	}
}

func TestRenderIDsAndRequiredKeys(t *testing.T) {
	msgs := []transcript.Message{user("u"), call("c1", "bash", `{"command":"ls"}`), result("c1", "", nil)}
	ex, err := Render(tgt, msgs, RenderOptions{Model: fakeModel, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Render(tgt, msgs, RenderOptions{Model: fakeModel, Now: fixedNow})
	if string(marshal(ex)) != string(marshal(again)) {
		t.Error("same input rendered differently")
	}
	if !strings.HasPrefix(ex.Info.ID, "ses_") || len(ex.Info.ID) != 4+12+14 {
		t.Errorf("session id %q", ex.Info.ID)
	}
	// Every id is below what OpenCode mints at the time of the write, so
	// the next prompt's messages sort after the import.
	limit := fmt.Sprintf("msg_%012x", uint64(fixedNow.UnixMilli())*0x1000&(1<<48-1))
	last := ex.Messages[len(ex.Messages)-1]
	if last.Parts[0].ID[4:16] >= limit[4:16] || last.Info.ID >= limit {
		t.Errorf("ids %s / %s not below %s", last.Info.ID, last.Parts[0].ID, limit)
	}
	doc := string(marshal(ex))
	for _, key := range []string{`"output":""`, `"title":"ls"`, `"metadata":{}`, `"slug":`, `"version":"1.18.33"`, `"parentID":"msg_`, `"cost":0`, `"tokens":{`, `"model":{"providerID":"fake","modelID":"fake-model"}`} {
		if !strings.Contains(doc, key) {
			t.Errorf("export lacks %s:\n%s", key, doc)
		}
	}
	if _, err := Render(agents.Target{Cwd: "/w", NativeID: "bogus"}, msgs, RenderOptions{Model: fakeModel}); err == nil {
		t.Error("native id without ses_ accepted")
	}
	bad := ex
	bad.Messages = append([]Message{}, ex.Messages...)
	bad.Messages[1].Info.ParentID = ""
	if Validate(bad) == nil {
		t.Error("assistant without parent validated")
	}
}

// read -> render -> read keeps every turn of every testdata file; the only
// change is thinking, which the writer leaves out.
func TestRoundTripTestdata(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/*.json*")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			orig, err := Reader{}.Read(f)
			if err != nil {
				t.Fatal(err)
			}
			ex, err := Render(tgt, orig, RenderOptions{Model: fakeModel, Now: fixedNow})
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(bytes.NewReader(marshal(ex)))
			if err != nil {
				t.Fatal(err)
			}
			var want []transcript.Message
			for _, m := range orig {
				if m.Kind != transcript.KindThinking {
					want = append(want, m)
				}
			}
			if g, w := brief(back.Messages), brief(want); strings.Join(g, "\n") != strings.Join(w, "\n") {
				t.Errorf("\n got: %q\nwant: %q", g, w)
			}
		})
	}
}
