package controlplane_test

import (
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
)

// User rows a node synced from its agent's own file (client id n.) or
// adopted from a native session (adopt.) are history (ids.History): the
// dispatcher handed each to the owner as a message to run, which the node
// then dropped. A message sent through cast while such rows land (mid-turn)
// is the one the owner is sent, alone.
func TestDispatcherSendsTheOwnerNoHistoryRows(t *testing.T) {
	t.Parallel()
	c, cmds, sess, token := rawOwned(t, "question")
	ctx := ctxT(t)

	// The turn on "question" runs: the node syncs what its agent wrote,
	// a repeat of the prompt among it, and the user sends a message.
	history := []*castv1.Message{
		{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "question", ClientId: ids.SyncedPrefix + "u1"},
		{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "adopted", ClientId: ids.AdoptedPrefix + "u2"},
		{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "answer", ClientId: ids.SyncedPrefix + "a1"},
	}
	if _, err := c.Nodes.AppendOwnerMessages(ctx, &castv1.AppendOwnerMessagesRequest{SessionId: sess.Id, Node: "n1", OwnerToken: token, Messages: history}); err != nil {
		t.Fatal(err)
	}
	sent, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: "and another thing"})
	if err != nil {
		t.Fatal(err)
	}

	// One watch in store order: every row stored before the sent message
	// was dispatched before it.
	for {
		d := nextCommand(t, cmds, func(c *castv1.Command) bool { return c.GetDeliverMessages().GetSessionId() == sess.Id }).GetDeliverMessages()
		last := false
		for _, m := range d.Messages {
			if ids.History(m.ClientId) {
				t.Errorf("the owner was sent history row %d (%q, client id %s) to run", m.Seq, m.Text, m.ClientId)
			}
			last = last || m.Seq == sent.Message.Seq
		}
		if last {
			return
		}
	}
}
