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
				o.ReceivedSeq, o.DeliveredSeq = tc.node, tc.node
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
