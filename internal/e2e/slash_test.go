package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/transcript"
)

// A slash command sent through cast runs in the real CLI: Claude Code's
// /compact on a short conversation calls no model and only prints "Not
// enough messages to compact.". The user sees that output as a notice
// after the message (the turn was silent: no answer, no notice), and the
// command, delivered, reaches the next model request once.
func TestSlashCommandOutputIsShown(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "start MARK-1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	n := len(r.fake.Turns())
	seq := r.send(sess.Id, "/compact")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq) // something after it: was a wait forever
	if got := len(r.fake.Turns()) - n; got != 0 {
		t.Fatalf("/compact on a short conversation made %d model requests, want none", got)
	}
	after := r.messages(sess.Id)[seq:]
	if len(after) != 1 || after[0].NoticeType != transcript.NoticeCommandOutput || after[0].Text != "Not enough messages to compact." {
		t.Fatalf("after /compact the thread holds %s %q, want the command's output as a notice", kinds(after), after[0].Text)
	}
	seq = r.send(sess.Id, "after MARK-2")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns := r.fake.Turns()
	last := turns[len(turns)-1]
	assertItems(t, last.Items, "MARK-1", "/compact", "Not enough messages to compact.", "MARK-2")
	if c := strings.Count(fmt.Sprint(last.Items), "/compact"); c != 1 {
		t.Fatalf("the next request carries /compact %d times, want once", c)
	}
}
