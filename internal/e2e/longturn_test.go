package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A real Claude Code turn that syncs more than 1,000 rows, and a user
// message sent while it runs (after more than 500 of them): the message is
// answered exactly once. Before delivery read every page, the node's next
// turn read one page of 500 agent rows, found no prompt, and marked the
// message delivered without running it.
func TestMessageSentDuringLongTurnIsAnsweredOnce(t *testing.T) {
	t.Parallel()
	// 340 rounds of an assistant note and one Read call (the cheapest tool:
	// no process per call), three rows each: the turn syncs 1,020 rows. One
	// call per round: the Claude reader drops parallel calls' results
	// (reported; fakemodel's Parallel reproduces it).
	const rowsPerRound, rounds, before = 3, 340, 205 // 615 rows before the message
	r := newTurnRig(t, "claude")
	cwd := t.TempDir()
	note := filepath.Join(cwd, "note.txt")
	if err := os.WriteFile(note, []byte("a small file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	read := fakemodel.Reply{Text: "reading the note again", Tool: &fakemodel.ToolCall{Name: "Read", Input: map[string]any{"file_path": note}}}
	gate := make(chan struct{})
	held := read
	held.Gate = gate
	r.fake.Enqueue(fakemodel.Repeat(before, read)...)
	r.fake.Enqueue(held)
	r.fake.Enqueue(fakemodel.Repeat(rounds-before-1, read)...)
	r.fake.Enqueue(fakemodel.Reply{Text: "LONG TURN DONE"})

	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: cwd, Text: "read the note many times"})
	if err != nil {
		t.Fatal(err)
	}
	// The turn is held on the model with `before` rounds' calls made and
	// synced: about a minute on an idle machine, several beside other
	// real-CLI tests on two cores.
	testharness.WaitFor(t, 8*time.Minute, "the long turn half-way", func() bool {
		s, err := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
		return err == nil && r.fake.TurnsStarted() > before && s.LastSeq >= 1+rowsPerRound*before
	})
	const mark = "MID-TURN-QUESTION-7"
	seq := r.send(sess.Id, mark)
	if seq <= 501 {
		t.Fatalf("the message got seq %d; it must come after more than 500 agent rows", seq)
	}
	close(gate)
	end := r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	// The second turn (the message's) must have run: wait for its answer.
	var msgs []*castv1.Message
	testharness.WaitFor(t, 2*time.Minute, "the answer to the mid-turn message", func() bool {
		msgs = r.allMessages(sess.Id)
		return strings.Contains(lastAssistant(msgs), mark)
	})
	if end.LastSeq < 1000 {
		t.Fatalf("the long turn synced up to seq %d; want more than 1,000 rows", end.LastSeq)
	}

	// The transcript: the message once, and exactly one answer to it.
	users, answers := 0, 0
	for _, m := range msgs {
		switch {
		case m.Kind == castv1.MessageKind_MESSAGE_KIND_USER && strings.Contains(m.Text, mark):
			users++
		case m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && strings.Contains(m.Text, "last user said: "+mark):
			answers++
		}
	}
	if users != 1 || answers != 1 {
		t.Fatalf("transcript: the message %d times, %d answers to it; want 1 and 1", users, answers)
	}
	// The model: asked to answer it once, and it appears once in the
	// history of that request.
	asked := 0
	for _, req := range r.fake.Turns() {
		if fakemodel.LastUserText(req.Items) != mark {
			continue
		}
		if n := strings.Count(fmt.Sprint(req.Items), mark); n != 1 {
			t.Fatalf("a request carried the message %d times", n)
		}
		if last := req.Items[len(req.Items)-1]; last.Role == "user" && last.Kind == fakemodel.KindText {
			asked++
		}
	}
	if asked != 1 {
		t.Fatalf("the model was asked to answer the message %d times; want once", asked)
	}
}

// allMessages reads the whole transcript, every page.
func (r *turnRig) allMessages(id string) []*castv1.Message {
	r.t.Helper()
	return readAll(r.t, r.c, id)
}

func readAll(t testing.TB, c *client.Client, id string) []*castv1.Message {
	t.Helper()
	var out []*castv1.Message
	err := c.EachMessage(context.Background(), 0, &castv1.ListMessagesRequest{SessionId: id}, func(m *castv1.Message) error {
		out = append(out, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func lastAssistant(msgs []*castv1.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT {
			return msgs[i].Text
		}
	}
	return ""
}

// A message held by a move, stored after the drained turn synced 600 rows,
// is delivered once on the destination. Before delivery read every page,
// the destination caught up on one page of 500 agent rows and never saw it.
func TestHeldMessagePastRow500IsDelivered(t *testing.T) {
	t.Parallel()
	r := newMigRig(t, migOpts{}, "claude")
	ctx := context.Background()
	repo := r.repo("laptop", "a")
	const rowsPerRound, rounds = 3, 200 // 600 agent rows before the held message
	read := fakemodel.Reply{Text: "reading app.txt again", Tool: &fakemodel.ToolCall{Name: "Read", Input: map[string]any{"file_path": filepath.Join(repo, "app.txt")}}}
	gate := make(chan struct{})
	r.fake.Enqueue(fakemodel.Repeat(rounds, read)...)
	r.fake.Enqueue(fakemodel.Reply{Text: "LONG TURN DONE", Gate: gate})
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: repo, Node: "laptop", Text: "read app.txt many times"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitSession("the long turn's last answer held", sess.Id, func(s *castv1.Session) bool {
		return r.fake.TurnsStarted() > rounds && s.LastSeq >= 1+rowsPerRound*rounds
	})
	mig := testharness.StartProcEnv(t, r.cast.env, r.cast.bin, "migrate", "start", "--to", "linux", "--wait", "2m", sess.Id)
	r.waitSession("session fenced", sess.Id, func(s *castv1.Session) bool { return s.FencedBy != "" })
	const mark = "HELD-PAST-ROW-500"
	resp, err := r.c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: mark})
	if err != nil {
		t.Fatalf("a message sent during the move must be accepted: %v", err)
	}
	held := resp.Message.Seq
	if held <= 501 {
		t.Fatalf("the held message got seq %d; it must come after more than 500 agent rows", held)
	}
	close(gate)
	if code, ok := mig.Wait(4 * time.Minute); !ok || code != 0 {
		t.Fatalf("cast migrate start: exit %d (finished %v)\n%s", code, ok, mig.Output())
	}
	var answers []*castv1.Message
	testharness.WaitFor(t, 2*time.Minute, "the held message answered on linux", func() bool {
		answers = nil
		for _, m := range r.allMessages(sess.Id) {
			if m.Seq > held && m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && strings.HasPrefix(m.Text, "FAKE-ANSWER") {
				answers = append(answers, m)
			}
		}
		return len(answers) > 0
	})
	if s := r.session(sess.Id); s.Node != "linux" {
		t.Fatalf("session on %q after the move", s.Node)
	}
	if n := countTurnsWith(r.fake, mark); n != 1 || len(answers) != 1 {
		t.Fatalf("the held message reached the model in %d turns with %d answers; want 1 and 1", n, len(answers))
	}
}

// allMessages reads the whole transcript, every page.
func (r *migRig) allMessages(id string) []*castv1.Message {
	r.t.Helper()
	return readAll(r.t, r.c, id)
}
