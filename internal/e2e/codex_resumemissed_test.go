package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A Codex turn whose rollout is gone fails to resume ("no rollout
// found"); the node rebuilds the rollout under a new thread id and runs
// the turn again. That turn's rows reach the neutral copy: rows are keyed
// by their line in the rollout ("line:N") and the rollout's id, and the
// rebuilt rollout numbers its lines from 1 again, so a rerun keyed by the
// old id reuses the client ids of the old rollout's rows, and the store
// refuses them (CLIENT_ID_REUSED: "already stored ... with a
// different body"). After two turns the rerun's answer is
// on line 21 of the new rollout, as the second turn's was in the old one.
func TestCodexResumeMissStoresTheRerunsRows(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "codex")
	cwd := t.TempDir()
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "codex", Cwd: cwd, Text: "first question MARK-CR1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	askLast(r, sess.Id, "second question MARK-CR2")
	files := codexFiles(t, r.homes["codex"])
	if len(files) == 0 {
		t.Fatalf("no rollout of %s under %s", sess.Id, r.homes["codex"])
	}
	for _, p := range files {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}

	seq := r.send(sess.Id, "third question MARK-CR3")
	testharness.WaitFor(t, 6*time.Minute, "the third message's turn over", func() bool {
		s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: sess.Id})
		return err == nil && s.State == castv1.SessionState_SESSION_STATE_IDLE && s.DeliveredSeq >= seq
	})
	turns := r.fake.Turns()
	assertOnce(t, turns[len(turns)-1].Items, "MARK-CR1", "MARK-CR2", "MARK-CR3")
	if !strings.Contains(r.node.Output(), "native session not found on resume; rebuilding it") {
		t.Fatal("the node never rebuilt the missing rollout")
	}
	if got := lastAssistant(r.allMessages(sess.Id)); !strings.Contains(got, "MARK-CR3") {
		t.Errorf("the rerun's answer is not in the neutral copy; the last answer stored is %q", got)
	}
	if strings.Contains(r.node.Output(), "with a different body") {
		for _, l := range strings.Split(r.node.Output(), "\n") {
			if strings.Contains(l, "with a different body") {
				t.Log(l)
			}
		}
		t.Fatal("the rerun's rows were refused as reusing the old rollout's client ids")
	}
}
