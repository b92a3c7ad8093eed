package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// `cast handoff --to pi`: the fake model writes the brief, the new pi
// session starts in the same folder with the brief, the exact `cast read`
// ranges and the direction as its first prompt; both sessions are linked.
func TestHandoffToPiWithModelBrief(t *testing.T) {
	t.Parallel()
	r := newTurnRigWith(t, func(c *controlplane.Config, fakeURL string) {
		c.Brief.Endpoint, c.Brief.Model, c.Brief.APIKey = fakeURL, "fake-model", "fake-key"
	}, "claude", "pi")
	ctx := context.Background()
	src, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "build the parser MARK-S1"})
	if err != nil {
		t.Fatal(err)
	}
	src = r.waitState(src.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	r.fake.Enqueue(fakemodel.Reply{Text: "Goal: parser. Next steps: run go test ./parser MARK-BRIEF"})
	resp, err := r.c.Sessions.HandoffSession(ctx, &castv1.HandoffSessionRequest{SessionId: src.Id, ToAgent: "pi", Model: "fake/fake-model",
		Direction: "finish the tests MARK-DIR", RequestId: ids.NewClientID()})
	if err != nil {
		t.Fatal(err)
	}
	if resp.BriefSource != "model" || !strings.Contains(resp.Brief, "MARK-BRIEF") {
		t.Fatalf("brief %q from %s", resp.Brief, resp.BriefSource)
	}
	n := resp.Session
	if n.Agent != "pi" || n.Cwd != src.Cwd || n.HandoffFrom != src.Id {
		t.Fatalf("new session %+v", n)
	}
	for _, want := range []string{"MARK-BRIEF", "cast read " + src.Id + " 1:", "cast diff " + src.Id, "MARK-DIR"} {
		if !strings.Contains(resp.Prompt, want) {
			t.Fatalf("prompt lacks %q:\n%s", want, resp.Prompt)
		}
	}
	r.waitState(n.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	turns := r.fake.Turns()
	assertItems(t, turns[len(turns)-1].Items, "MARK-BRIEF")
	got, _ := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: src.Id})
	if len(got.Pins) != 1 || got.Pins[0] != "Handed off to "+n.Id+" on pi" {
		t.Fatalf("source pins %v", got.Pins)
	}
}

// With the brief model down, the brief falls back to the pins and the last
// answer, and says so; --dry-run starts nothing.
func TestHandoffFallbackBriefDryRun(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.Brief.Endpoint = "http://" + freeAddr(t) })
	c := testharness.Dial(t, srv.Addr())
	testharness.StartNode(t, srv.Addr(), "n1", nil)
	ctx := context.Background()
	var src *castv1.Session
	testharness.WaitFor(t, 20*time.Second, "a session", func() bool {
		var err error
		src, err = c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", Cwd: "/tmp", HistoryMessages: 2, Title: "the parser"})
		return err == nil
	})
	if _, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: src.Id, Messages: []*castv1.Message{
		{ClientId: "h1", Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "write it"},
		{ClientId: "h2", Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "Done: parser.go written MARK-LAST"}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Sessions.HandoffSession(ctx, &castv1.HandoffSessionRequest{SessionId: src.Id, ToAgent: "cursor", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.BriefSource != "fallback" || resp.Session != nil || !strings.Contains(resp.Prompt, "MARK-LAST") || !strings.Contains(resp.Prompt, "Goal: the parser") {
		t.Fatalf("fallback dry run: source %s, session %v, prompt:\n%s", resp.BriefSource, resp.Session, resp.Prompt)
	}
	list, _ := c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{IncludeSubagents: true})
	if len(list.Sessions) != 1 {
		t.Fatalf("a dry run created %d sessions", len(list.Sessions)-1)
	}
}
