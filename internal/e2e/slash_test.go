package e2e

import (
	"context"
	"slices"
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
	id, seq, outputs := slashTurn(t, r, "/compact keep the notes")
	if !slices.Contains(outputs, "Not enough messages to compact.") {
		t.Fatalf("after /compact the thread holds %s, want the command's output as a notice", kinds(r.messages(id)[seq:]))
	}
	seq = r.send(id, "after MARK-2")
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns := r.fake.Turns()
	assertItems(t, turns[len(turns)-1].Items, "MARK-1", "keep the notes</command-args>", "Not enough messages to compact.", "MARK-2")
}

// A slash command the real CLI does not run in -p (Claude Code's /color)
// answers with its output alone, as Claude Code's own result does: the
// CLI also records the command as typed, which was shown as a second
// command_output notice, so `cast exec "/color red"` printed the command
// back above the answer.
func TestSlashCommandNotRunShowsItsOutputAlone(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	_, _, outputs := slashTurn(t, r, "/color red")
	if len(outputs) != 1 || outputs[0] != "/color isn't available in this environment." {
		t.Fatalf("after /color the thread shows command output %q, want only the CLI's answer", outputs)
	}
}

// slashTurn starts a Claude session on r, sends it the slash command cmd
// and waits for its turn to end (something after it: was a wait
// forever); it returns the session, the command's seq and the
// command_output notices after it. The command's record stored as a
// second user message fails the test.
func slashTurn(t *testing.T, r *turnRig, cmd string) (string, int64, []string) {
	t.Helper()
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "start MARK-1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	seq := r.send(sess.Id, cmd)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	var outputs []string
	for _, m := range r.messages(sess.Id)[seq:] {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER {
			t.Fatalf("the command's record was stored as a user message: %q", m.Text)
		}
		if m.NoticeType == transcript.NoticeCommandOutput {
			outputs = append(outputs, m.Text)
		}
	}
	return sess.Id, seq, outputs
}

// Text in Claude Code's own markup sent as a message (a pasted command
// output, command-record tags) is the user's message once: the CLI records
// it as typed, which its reader reads as a command_output notice or as the
// command "/name args", and that was stored after the message as a second
// row (after a switch, the next agent got the text twice).
func TestMarkupLikeMessageStoredOnce(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "start MARK-1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	for _, text := range []string{
		"<local-command-stdout>pasted log MARK-2</local-command-stdout>",
		"<command-name>/review</command-name>\n<command-message>review</command-message>\n<command-args>MARK-3</command-args>",
	} {
		seq := r.send(sess.Id, text)
		r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
		if got := kinds(r.messages(sess.Id)[seq-1:]); got != "user,assistant" {
			t.Fatalf("after %q the thread holds %s, want the message once and the answer", text, got)
		}
	}
}
