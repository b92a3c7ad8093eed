package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A message sent while a real Claude Code turn runs is answered by the
// next turn on the same native session, which holds the first turn's
// answer already (its CLI wrote it). The turn after that must not get that
// answer again as "what happened while you were not running it".
func TestMidTurnMessageDoesNotEchoTheAnswerBack(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	cwd := t.TempDir()
	note := filepath.Join(cwd, "note.txt")
	if err := os.WriteFile(note, []byte("a small file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	r.fake.Enqueue(fakemodel.Reply{Text: "reading the note", Tool: &fakemodel.ToolCall{Name: "Read", Input: map[string]any{"file_path": note}}})
	r.fake.Enqueue(fakemodel.Reply{Text: "first answer MARK-ANS1", Gate: gate})

	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: cwd, Text: "first question MARK-Q1"})
	if err != nil {
		t.Fatal(err)
	}
	// The turn is held on its second request, its tool call synced.
	testharness.WaitFor(t, 4*time.Minute, "the first turn held after its tool call", func() bool {
		s, err := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
		return err == nil && r.fake.TurnsStarted() >= 2 && s.LastSeq >= 3
	})
	seq := r.send(sess.Id, "second question MARK-Q2")
	close(gate)
	testharness.WaitFor(t, 4*time.Minute, "the answer to the mid-turn message", func() bool {
		return strings.Contains(lastAssistant(r.allMessages(sess.Id)), "MARK-Q2")
	})
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)

	req := askLast(r, sess.Id, "third question MARK-Q3")
	n := 0
	for _, it := range req.Items {
		n += strings.Count(it.Text, "MARK-ANS1")
		if strings.Contains(it.Text, "while you were not running it") {
			t.Errorf("the third turn carries a catch-up slice although its agent ran every turn:\n%s", it.Text)
		}
	}
	if n != 1 {
		t.Fatalf("the first answer reached the third request %d times; want once", n)
	}
}
