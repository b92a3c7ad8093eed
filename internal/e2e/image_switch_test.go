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

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// An image a tool returned in Claude's turn (its Read of a screenshot: a
// result with no text, only the image) is synced into the neutral copy,
// and after a switch the new agent's request holds it once, with the
// history before it.
func TestToolImageCarriedAcrossSwitch(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "codex")
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
}
