package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// `cast merge` printed "merged F #4-6" while the history it wrote into the
// parent said "(seq 5-6)": the slice's header named the span of the
// fork's content, which leaves out the fork's own notice (#4) and any
// notice at either end, while the merge covers, and records on the fork
// (merged_upto_seq), the whole range after the fork point. The CLI, the
// API's from_seq/to_seq, the merge notice and the header now all name
// that range.
func TestMergeSaysOneRange(t *testing.T) {
	c, addr := diffRig(t)
	ctx := context.Background()
	parent := historySession(t, c, t.TempDir(), []*castv1.Message{
		{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "start"},
		{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "started"},
		{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "go on"},
	})
	fork, err := c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: parent.Id, RequestId: "merge-range-fork"})
	if err != nil {
		t.Fatal(err)
	}
	work := []*castv1.Message{
		{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "did the work in the fork"},
		{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "and checked it"},
	}
	for i, m := range work {
		m.ClientId = fmt.Sprintf("%s.w%d", fork.Id, i)
	}
	stored, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: fork.Id, Messages: work})
	if err != nil {
		t.Fatal(err)
	}
	// The fork's notice sits between the fork point and the work.
	from, to := fork.ForkedAtSeq+1, stored.Messages[len(stored.Messages)-1].Seq
	if stored.Messages[0].Seq != from+1 {
		t.Fatalf("the fork's work starts at #%d; want #%d, after its notice at #%d", stored.Messages[0].Seq, from+1, from)
	}

	out := mustMain(t, addr, "merge", fork.Id)
	if want := fmt.Sprintf("merged %s #%d-%d into %s", fork.Id, from, to, parent.Id); !strings.Contains(out, want) {
		t.Fatalf("cast merge printed %q; want it to say %q", out, want)
	}
	resp, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: parent.Id, StartSeq: parent.LastSeq + 1})
	if err != nil {
		t.Fatal(err)
	}
	var notice, history string
	for _, m := range resp.Messages {
		switch {
		case strings.HasSuffix(m.ClientId, ".notice"):
			notice = m.Text
		case strings.HasSuffix(m.ClientId, ".history"):
			history = m.Text
		}
	}
	if want := fmt.Sprintf("(messages %d:%d)", from, to); !strings.Contains(notice, want) {
		t.Errorf("the merge notice %q does not say %s", notice, want)
	}
	for _, want := range []string{fmt.Sprintf("(seq %d-%d)", from, to), fmt.Sprintf("the full record is: cast read %s %d:%d", fork.Id, from, to)} {
		if !strings.Contains(history, want) {
			t.Errorf("the merged history does not say %q:\n%s", want, history)
		}
	}
}
