package e2e

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A session starts on Claude Code and runs a tool call, switches to Codex
// which answers with the whole history in its request, and back; the
// conversation id never changes. Cursor is refused up front. A fork onto pi
// carries the history while the original goes on.
func TestSwitchClaudeCodexClaudeAndFork(t *testing.T) {
	r := newTurnRig(t, "claude", "codex", "pi")
	ctx := context.Background()
	cwd := t.TempDir()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: cwd, Text: "TOOLCALL CMD[echo sw-tool-ok] MARK-C1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)

	_, err = r.c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: sess.Id, Agent: "cursor"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "Cursor cannot take over an existing session's history; start a new Cursor session instead") {
		t.Fatalf("switch to cursor: %v", err)
	}

	sw, err := r.c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: sess.Id, Agent: "codex"})
	if err != nil || sw.Id != sess.Id || sw.Agent != "codex" {
		t.Fatalf("switch to codex: %v %v", sw, err)
	}
	seq := r.send(sess.Id, "over to you MARK-X1")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns := r.fake.Turns()
	codexReq := turns[len(turns)-1]
	if codexReq.API != "responses" {
		t.Fatalf("last request went to %s, want codex's responses API", codexReq.API)
	}
	assertItems(t, codexReq.Items, "MARK-C1", "echo sw-tool-ok", "sw-tool-ok", "Now using Codex (was Claude Code)", "MARK-X1")

	msgs := r.messages(sess.Id)
	var divider *castv1.Message
	for _, m := range msgs {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_NOTICE && m.NoticeType == "agent_switch" {
			divider = m
		}
	}
	if divider == nil || !strings.HasSuffix(divider.Text, "This session continues here. History above is the same thread.") {
		t.Fatalf("divider: %v", divider)
	}
	if last := msgs[len(msgs)-1]; last.Agent != "codex" || last.Kind != castv1.MessageKind_MESSAGE_KIND_ASSISTANT {
		t.Fatalf("last message %v by %q", last.Kind, last.Agent)
	}

	if _, err := r.c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: sess.Id, Agent: "claude"}); err != nil {
		t.Fatal(err)
	}
	seq = r.send(sess.Id, "back to claude MARK-C2")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns = r.fake.Turns()
	claudeReq := turns[len(turns)-1]
	if claudeReq.API != "anthropic" {
		t.Fatalf("last request went to %s, want anthropic", claudeReq.API)
	}
	assertItems(t, claudeReq.Items, "MARK-C1", "MARK-X1", "MARK-C2")

	// Fork onto pi at the tip; the original is untouched.
	before := r.messages(sess.Id)
	fork, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: sess.Id, Agent: "pi", Model: "fake/fake-model", RequestId: "fork-1"})
	if err != nil {
		t.Fatal(err)
	}
	if fork.ParentId != sess.Id || fork.RootId != sess.Id || fork.ForkedAtSeq != int64(len(before)) || fork.Agent != "pi" {
		t.Fatalf("fork lineage: %+v", fork)
	}
	again, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: sess.Id, Agent: "pi", RequestId: "fork-1"})
	if err != nil || again.Id != fork.Id || again.LastSeq != fork.LastSeq {
		t.Fatalf("retried fork: %v %v", again, err)
	}
	seq = r.send(fork.Id, "on pi now MARK-P1")
	r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns = r.fake.Turns()
	assertItems(t, turns[len(turns)-1].Items, "MARK-C1", "MARK-X1", "MARK-C2", "MARK-P1")
	if after := r.messages(sess.Id); len(after) != len(before) {
		t.Fatalf("the fork changed its parent: %d -> %d messages", len(before), len(after))
	}
	_, err = r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: sess.Id, AtSeq: 9999})
	if client.ReasonOf(err) != "INVALID_ARGUMENT" {
		t.Fatalf("fork past the tip: %v", err)
	}
}
