package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/transcript"
)

// A Gemini turn whose native session is gone from the project's chats
// folder fails to resume (`Invalid session identifier`): that is no
// refusal. The node rebuilds the native session from the neutral copy and
// runs the turn once; nothing is reported undelivered (seed 13 of the
// delivery model test dropped seqs 11-12 that way).
func TestGeminiResumeMissRebuildsAndDelivers(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "gemini")
	cwd := t.TempDir()
	other, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "gemini", Cwd: cwd, Text: "another session MARK-GO1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(other.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	chats := func() map[string]bool {
		m, _ := filepath.Glob(filepath.Join(r.homes["gemini"], ".gemini", "tmp", "*", "chats", "session-*.json*"))
		set := map[string]bool{}
		for _, p := range m {
			set[p] = true
		}
		return set
	}
	before := chats()
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "gemini", Cwd: cwd, Text: "first question MARK-GR1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	gone := 0
	for p := range chats() {
		if !before[p] {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			gone++
		}
	}
	if gone == 0 {
		t.Fatalf("no native file of %s found under %s", sess.Id, r.homes["gemini"])
	}

	req := askLast(r, sess.Id, "second question MARK-GR2")
	assertOnce(t, req.Items, "MARK-GR1", "MARK-GR2")
	for _, m := range r.messages(sess.Id) {
		if m.NoticeType == transcript.NoticeUndelivered {
			t.Fatalf("a resume that found no native session reported messages undelivered: %q", m.Text)
		}
	}
	if !strings.Contains(r.node.Output(), "native session not found on resume; rebuilding it") {
		t.Fatal("the node never rebuilt the missing native session")
	}
}
