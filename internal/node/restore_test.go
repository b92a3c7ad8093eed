package node

import (
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A node assigned a session by a control plane whose store was restored
// from an older snapshot holds delivery cursors past what that store
// recorded: the messages sent since the restore took seqs the node had
// already delivered, and it counted them as delivered, so they never
// reached a model. The node now takes the store's delivery cursor back
// (read again, so an assignment read before the node's own report landed
// is not taken for a restore), and those messages run, each once.
func TestAssignmentFromARestoredStoreRunsTheNewMessages(t *testing.T) {
	user := func(text, id string) *castv1.Message {
		return &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: text, ClientId: id}
	}
	answer := func(text, id string) *castv1.Message {
		return &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: text, Agent: "claude", ClientId: id}
	}
	tests := []struct {
		name string
		rows []*castv1.Message
		// node is the node's cursor (received and delivered); stored the
		// store's delivered seq, shown the one the assignment carries.
		node, stored, shown int64
		// pending: the node's last report has not landed (it holds the
		// client id of the message at its cursor, as deliver records it).
		pending    bool
		receivedID string
		// delivered is the node's delivered seq once assigned.
		delivered int64
		want      []string // the user texts of the model's request, each once
	}{
		{name: "the store's last seq below the node's cursor",
			rows: []*castv1.Message{user("first question", "u1"), answer("first answer", "a1"), user("new question", "n1")},
			node: 5, stored: 1, shown: 1, delivered: 1, want: []string{"first question", "new question"}},
		{name: "new messages past the node's cursor too",
			rows: []*castv1.Message{user("first question", "u1"), answer("first answer", "a1"), user("new question", "n1"), user("later question", "n2")},
			node: 3, stored: 1, shown: 1, delivered: 1, want: []string{"first question", "new question", "later question"}},
		{name: "an assignment read before the node's report landed is no restore",
			rows: []*castv1.Message{user("first question", "u1"), answer("first answer", "a1"), user("second question", "u2"), answer("second answer", "a2")},
			node: 3, stored: 3, shown: 1, delivered: 3},
		{name: "a report still pending, the store's last seq up to the node's cursor",
			rows: []*castv1.Message{user("first question", "u1"), answer("first answer", "a1"), user("new question", "n1")},
			node: 3, stored: 1, shown: 1, pending: true, receivedID: "u2", delivered: 1, want: []string{"first question", "new question"}},
		{name: "a report still pending is no restore",
			rows: []*castv1.Message{user("first question", "u1"), answer("first answer", "a1"), user("second question", "u2"), answer("second answer", "a2")},
			node: 3, stored: 1, shown: 1, pending: true, receivedID: "u2", delivered: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fm := fakemodel.Start(t)
			a, p, ctx := workerDaemon(t, fm)
			rows := p.add("s1", tc.rows...)
			last := rows[len(rows)-1].Seq
			cwd := t.TempDir()
			if err := a.st.assign("s1", func(o *owned) {
				o.Token, o.Agent, o.Cwd = 1, "claude", cwd
				o.ReceivedSeq, o.DeliveredSeq, o.ReceivedID = tc.node, tc.node, tc.receivedID
				if tc.pending {
					o.Report = &turnReport{State: castv1.SessionState_SESSION_STATE_IDLE, Pending: true}
				}
			}); err != nil {
				t.Fatal(err)
			}
			p.mu.Lock()
			p.sessions["s1"] = &castv1.Session{Id: "s1", Agent: "claude", Cwd: cwd, LastSeq: last, DeliveredSeq: tc.stored}
			p.mu.Unlock()
			assign := &castv1.Command{Kind: &castv1.Command_AssignSession{AssignSession: &castv1.AssignSession{
				Session: &castv1.Session{Id: "s1", Agent: "claude", Cwd: cwd, LastSeq: last, DeliveredSeq: tc.shown}, OwnerToken: 1}}}
			if err := a.handle(ctx, assign); err != nil {
				t.Fatal(err)
			}
			if o, _ := a.st.get("s1"); o.DeliveredSeq != tc.delivered {
				t.Fatalf("delivered seq %d once assigned, want %d (the store's rows past it run, each once)", o.DeliveredSeq, tc.delivered)
			}
			if tc.want == nil {
				return
			}
			idleAt(ctx, t, a, p, last)
			turns := fm.Turns()
			users := strings.Join(userTexts(turns[len(turns)-1]), "\n")
			for _, q := range tc.want {
				if n := strings.Count(users, q); n != 1 {
					t.Fatalf("the model's request holds %q %d times, want once; user items %q", q, n, users)
				}
			}
		})
	}
}

// An assignment from a restored store that comes while the session's turn
// runs is acted on when the turn ends: the turn's end takes the store's
// delivery cursor (its report carries it, not the node's old one) and the
// message sent since the restore runs, once. The node left the cursors of
// a running turn alone and looked again only at the next assignment (a
// reconnect, a move), so the new message, whose seq the node had already
// taken, never reached the model.
func TestRestoredStoreAssignedWhileATurnRunsRunsTheNewMessage(t *testing.T) {
	fm := fakemodel.Start(t)
	a, p, ctx := workerDaemon(t, fm)
	setUpSession(t, a, p, nil) // seqs 1-3, the node delivered up to 2 and runs 3
	answer := heldAtTheModel(ctx, t, a, fm)

	// The store comes back from a snapshot holding only the first
	// question, and the user sends a new one, which takes seq 2.
	p.mu.Lock()
	p.msgs["s1"] = p.msgs["s1"][:1]
	p.mu.Unlock()
	rows := p.add("s1", &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "after restore question", ClientId: "n1"})
	o, _ := a.st.get("s1")
	restored := &castv1.Session{Id: "s1", Agent: "claude", Cwd: o.Cwd, LastSeq: rows[0].Seq, DeliveredSeq: 1}
	p.mu.Lock()
	p.sessions["s1"] = restored
	p.mu.Unlock()
	assign := &castv1.Command{Kind: &castv1.Command_AssignSession{AssignSession: &castv1.AssignSession{Session: restored, OwnerToken: 1}}}
	if err := a.handle(ctx, assign); err != nil {
		t.Fatal(err)
	}
	if err := a.deliver("s1", 1, rows); err != nil { // the control plane hands the new message on too
		t.Fatal(err)
	}
	fm.SetPolicy(nil)
	close(answer)

	// The running turn's end (its report) carries the store's cursor.
	for st := castv1.SessionState_SESSION_STATE_RUNNING; st != castv1.SessionState_SESSION_STATE_IDLE; {
		select {
		case st = <-p.reports:
		case <-ctx.Done():
			t.Fatal("the running turn never ended")
		}
	}
	p.mu.Lock()
	ended := p.delivered[len(p.delivered)-1]
	p.mu.Unlock()
	if ended != 1 {
		t.Fatalf("the running turn's end reported delivery cursor %d, want the restored store's 1 (the new message at seq 2 runs)", ended)
	}
	idleAt(ctx, t, a, p, rows[0].Seq)
	turns := fm.Turns()
	users := strings.Join(userTexts(turns[len(turns)-1]), "\n")
	if n := strings.Count(users, "after restore question"); n != 1 {
		t.Fatalf("the model's request holds the new message %d times, want once; user items %q", n, users)
	}
}
