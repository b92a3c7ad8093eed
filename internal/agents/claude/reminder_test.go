package claude

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// What a person typed in Claude Code is content even where it looks like
// the markup Claude Code injects; only what Claude Code itself added (isMeta
// records, attachment records, text blocks holding nothing but reminders) is
// left out. The shapes are those Claude Code 2.1 writes: a typed prompt is a
// string, a prompt with a pasted image a text block beside the image.
func TestTypedReminderLookalikesAreContent(t *testing.T) {
	const typed1 = "TYPED-1 why does my hook print <system-reminder>TYPED-R1</system-reminder> into the log?"
	const typed2 = "<system-reminder>TYPED-2 all of this was typed</system-reminder>"
	const typed3 = "TYPED-3 see the screenshot: <system-reminder>TYPED-R3</system-reminder>"
	lines := []string{
		`{"type":"user","uuid":"u1","parentUuid":null,"timestamp":"2026-11-30T10:00:00.000Z","message":{"role":"user","content":` + q(typed1) + `}}`,
		`{"type":"attachment","uuid":"x1","parentUuid":"u1","timestamp":"2026-11-30T10:00:00.001Z","attachment":{"type":"file","filename":"/w/hook.sh","content":{"type":"text","file":{"filePath":"/w/hook.sh","content":"INJECTED-FILE"}}}}`,
		`{"type":"assistant","uuid":"a1","parentUuid":"x1","timestamp":"2026-11-30T10:00:01.000Z","message":{"id":"msg_1","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ANSWER-1"}]}}`,
		`{"type":"user","uuid":"u2","parentUuid":"a1","timestamp":"2026-11-30T10:00:02.000Z","message":{"role":"user","content":` + q(typed2) + `}}`,
		`{"type":"user","uuid":"m1","parentUuid":"u2","isMeta":true,"timestamp":"2026-11-30T10:00:02.001Z","message":{"role":"user","content":"<system-reminder>INJECTED-META</system-reminder>"}}`,
		`{"type":"assistant","uuid":"a2","parentUuid":"m1","timestamp":"2026-11-30T10:00:03.000Z","message":{"id":"msg_2","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ANSWER-2"}]}}`,
		`{"type":"user","uuid":"u3","parentUuid":"a2","timestamp":"2026-11-30T10:00:04.000Z","message":{"role":"user","content":[` +
			`{"type":"text","text":"<system-reminder>\nINJECTED-BLOCK the user opened hook.sh\n</system-reminder>"},` +
			`{"type":"text","text":` + q(typed3) + `},` +
			`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}}`,
		`{"type":"assistant","uuid":"a3","parentUuid":"u3","timestamp":"2026-11-30T10:00:05.000Z","message":{"id":"msg_3","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ANSWER-3"}]}}`,
	}
	msgs, _, err := Parse(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user " + typed1, "assistant ANSWER-1", "user " + typed2, "assistant ANSWER-2", "user " + typed3, "assistant ANSWER-3"}
	got := texts(msgs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("\n got: %q\nwant: %q", got, want)
	}
	// The pasted image rides with the text it was sent with.
	if im := msgs[4].Images; len(im) != 1 || im[0].MediaType != "image/png" || len(im[0].Data) != 8 {
		t.Fatalf("the pasted image: %+v, want one 8-byte PNG on the typed text", im)
	}
	// Written for Claude and read back, the typed text is still whole.
	w, err := Writer{}.Write(agents.Target{Home: t.TempDir(), Cwd: "/w", SessionID: "ses-reminder"}, msgs)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Reader{}.Read(w.Path)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(back); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after a round trip\n got: %q\nwant: %q", got, want)
	}
}

func texts(msgs []transcript.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Kind.String()+" "+m.Text)
	}
	return out
}

func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
