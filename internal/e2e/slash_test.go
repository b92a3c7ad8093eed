package e2e

import (
	"context"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/transcript"
)

// A slash command sent through cast runs in the real CLI: Claude Code's
// /compact on a short conversation only prints "Not enough messages to
// compact." (at times it then shows the model the command and its output).
// The user sees that output as a notice after the message (the turn was
// silent: no answer, no notice), the command's record is not stored as a
// second user message, and the command reaches the next model request.
func TestSlashCommandOutputIsShown(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "start MARK-1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	seq := r.send(sess.Id, "/compact keep the notes")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq) // something after it: was a wait forever
	shown := false
	for _, m := range r.messages(sess.Id)[seq:] {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER {
			t.Fatalf("the command's record was stored as a user message: %q", m.Text)
		}
		shown = shown || m.NoticeType == transcript.NoticeCommandOutput && m.Text == "Not enough messages to compact."
	}
	if !shown {
		t.Fatalf("after /compact the thread holds %s, want the command's output as a notice", kinds(r.messages(sess.Id)[seq:]))
	}
	seq = r.send(sess.Id, "after MARK-2")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns := r.fake.Turns()
	assertItems(t, turns[len(turns)-1].Items, "MARK-1", "keep the notes</command-args>", "Not enough messages to compact.", "MARK-2")
}
