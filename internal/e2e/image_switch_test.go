package e2e

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// An image a tool returned in Claude's turn (its Read of a screenshot: a
// result with no text, only the image) is synced into the neutral copy,
// and after a switch the new agent's request holds it once, with the
// history before it.
func TestToolImageCarriedAcrossSwitch(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "codex", "gemini")
	cwd := t.TempDir()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for x := range 8 {
		for y := range 8 {
			img.Set(x, y, color.RGBA{R: 200, G: uint8(x * 20), B: uint8(y * 20), A: 255})
		}
	}
	var b bytes.Buffer
	must(t, png.Encode(&b, img))
	shot := filepath.Join(cwd, "shot.png")
	must(t, os.WriteFile(shot, b.Bytes(), 0o600))
	r.fake.Enqueue(fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: "Read", Input: map[string]any{"file_path": shot}}})
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: cwd, Text: "look at shot.png MARK-IMG1"})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	// What Claude sent the model for the screenshot (it may re-encode it).
	var sent string
	for _, req := range r.fake.Turns() {
		for _, it := range req.Items {
			if it.Kind == fakemodel.KindImage {
				sent = it.Text
			}
		}
	}
	if sent == "" {
		t.Fatalf("claude never sent the screenshot; stored: %s", kinds(r.messages(sess.Id)))
	}
	stored := 0
	for _, msg := range r.messages(sess.Id) {
		stored += len(msg.Images)
	}
	if stored == 0 {
		t.Fatalf("the screenshot was not synced into the neutral copy: %s", kinds(r.messages(sess.Id)))
	}
	r.switchTo(sess.Id, "codex")
	seq := r.send(sess.Id, "what did it show MARK-IMG2")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	req := requestWith(t, r.fake, "MARK-IMG2")
	// Codex drops a tool output it cannot read with its call, silently.
	assertItems(t, req.Items, "look at shot.png MARK-IMG1", shot, "what did it show MARK-IMG2")
	n := 0
	for _, it := range req.Items {
		if it.Kind == fakemodel.KindImage && it.Text == sent {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("codex's request holds the screenshot %d times, want once:\n%s", n, clipItems(fmtItems(req.Items)))
	}

	// A Claude turn stopped after the tool returned the screenshot, then
	// Gemini: it repairs the interrupted history it resumes and repeats
	// the result with its picture ("<id>_response"). The thread gets the
	// prompt and one answer, no user message of Gemini's making (read as
	// one, it was taken for a new prompt and ran a second turn).
	gate := make(chan struct{})
	defer close(gate)
	started := r.fake.TurnsStarted()
	r.fake.Enqueue(fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: "Read", Input: map[string]any{"file_path": shot}}}, fakemodel.Reply{Text: "held", Gate: gate})
	stopped, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: cwd, Text: "look again MARK-IMG3"})
	must(t, err)
	testharness.WaitFor(t, 2*time.Minute, "claude sends the screenshot back", func() bool { return r.fake.TurnsStarted() >= started+2 })
	r.interrupt(stopped.Id, 1)
	r.switchTo(stopped.Id, "gemini")
	seq = r.send(stopped.Id, "what was it MARK-IMG4")
	r.waitState(stopped.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	var after []*castv1.Message
	for _, m := range r.messages(stopped.Id) {
		if m.Seq > seq && m.Kind != castv1.MessageKind_MESSAGE_KIND_NOTICE {
			after = append(after, m)
		}
	}
	if len(after) != 1 || after[0].Kind != castv1.MessageKind_MESSAGE_KIND_ASSISTANT {
		t.Fatalf("after the prompt to gemini the thread holds %s, want its one answer", kinds(after))
	}
}
