package node

import (
	"context"
	"testing"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/transcript"
)

// A user row the agent wrote into its own file during a turn (one cast
// cannot match to the thread: a repeat of the prompt, a record the CLI
// adds) is synced into the thread, and the control plane hands every
// stored user row to the owner. It is the turn's own history, not a new
// request: after the turn nothing waits (it started a second turn, whose
// prompt repeated the first). A message the user sent through cast while
// the turn ran still waits, alone.
func TestUserRowTheAgentWroteIsNoNewPrompt(t *testing.T) {
	for _, tc := range []struct {
		name       string
		castSends  bool   // the user sends a message through cast mid-turn
		wantPrompt string // the next turn's prompt, "" for none
	}{
		{"only the agent's row", false, ""},
		{"and a message sent through cast", true, "and another thing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, p := rerunDaemon(t, fakemodel.Start(t))
			// No worker runs a turn here: the test looks at what would run.
			stopped, cancel := context.WithCancel(context.Background())
			cancel()
			a.runCtx = stopped
			p.mu.Lock()
			p.dispatch = func(sessionID string, stored []*castv1.Message) {
				var users []*castv1.Message
				for _, m := range stored {
					if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER {
						users = append(users, m)
					}
				}
				_ = a.deliver(sessionID, 1, users)
			}
			p.mu.Unlock()
			_ = p.add("s1", &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "question", ClientId: "u1"})
			if err := a.st.assign("s1", func(o *owned) {
				o.Token, o.Agent, o.Cwd, o.ReceivedSeq = 1, "claude", t.TempDir(), 1
			}); err != nil {
				t.Fatal(err)
			}
			o, _ := a.st.get("s1")
			rt := runner.Turn{NativeID: "n", NativePath: "/h/n.jsonl"}
			sy := newSyncer(a, "s1", o, rt, nil)
			sy.emit(transcript.Message{Kind: transcript.KindUser, NativeID: "extra", Text: "question"})
			if err := sy.close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if tc.castSends {
				sent := p.add("s1", &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: tc.wantPrompt, ClientId: "u2"})
				if err := a.deliver("s1", 1, sent); err != nil {
					t.Fatal(err)
				}
			}
			sy = newSyncer(a, "s1", o, rt, nil)
			sy.emit(transcript.Message{Kind: transcript.KindAssistant, NativeID: "answer", Text: "answer"})
			if err := sy.close(context.Background()); err != nil {
				t.Fatal(err)
			}
			tr := &turn{a: a, id: "s1", o: o, lg: zap.NewNop(), sync: sy, rt: rt,
				res: runner.Result{NativeID: "n", NativePath: "/h/n.jsonl", PromptSeen: true}}
			if err := tr.completed(context.Background()); err != nil {
				t.Fatal(err)
			}

			o, _ = a.st.get("s1")
			waits := o.ReceivedSeq > o.DeliveredSeq
			if !waits {
				if tc.wantPrompt != "" {
					t.Fatalf("the message sent through cast waits for no turn (received %d, delivered %d)", o.ReceivedSeq, o.DeliveredSeq)
				}
				return
			}
			if tc.wantPrompt == "" {
				t.Fatalf("a turn waits to run after the agent's own user row (received %d, delivered %d)", o.ReceivedSeq, o.DeliveredSeq)
			}
			prompt, _, err := a.pendingPrompt(context.Background(), "s1", o)
			if err != nil {
				t.Fatal(err)
			}
			if prompt != tc.wantPrompt {
				t.Fatalf("the next turn's prompt is %q, want %q", prompt, tc.wantPrompt)
			}
		})
	}
}
