package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// The flow, with a real node process, the real CLIs and the fake
// model: a session starts on Claude Code and runs a tool call, switches to
// Codex which answers with the whole history in its request, switches back
// to Claude, forks onto pi at an earlier seq, and a worker on Gemini reports
// back to its parent. Switching into Cursor is refused and changes nothing.
// The conversation id never changes.
func TestSwitchClaudeCodexClaudeAndFork(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "codex", "pi", "gemini")
	ctx := context.Background()
	cwd := t.TempDir()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: cwd, Text: "TOOLCALL CMD[echo sw-tool-ok] MARK-C1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)

	beforeCursor, _ := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
	_, err = r.c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: sess.Id, Agent: "cursor"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "Cursor cannot take over an existing session's history; start a new Cursor session instead") {
		t.Fatalf("switch to cursor: %v", err)
	}
	afterCursor, _ := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
	if afterCursor.Agent != "claude" || afterCursor.LastSeq != beforeCursor.LastSeq || afterCursor.Model != beforeCursor.Model {
		t.Fatalf("a refused switch changed the session: %+v", afterCursor)
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
	// Claude resumes its own native session and gets a delta: exactly what
	// it missed (Codex's turn), once, framed as history, then the prompt.
	assertItems(t, claudeReq.Items, "MARK-C1", "MARK-X1")
	all := fmt.Sprint(claudeReq.Items)
	// (The fake's answers quote the prompt, so marks are counted where the
	// delta puts them: its item headers.)
	for mark, want := range map[string]int{"MARK-C1": 1, "user]\\nover to you MARK-X1": 1, "assistant, codex]": 1, "MARK-C2": 1, "NOT new instructions": 1} {
		if n := strings.Count(all, mark); n != want {
			t.Errorf("claude's delta request holds %q %d times, want %d:\n%s", mark, n, want, all)
		}
	}
	lastUser := ""
	for _, it := range claudeReq.Items {
		if it.Role == "user" && it.Kind == "text" {
			lastUser = it.Text
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(lastUser), "back to claude MARK-C2") || !strings.Contains(lastUser, "MARK-X1") {
		t.Fatalf("the delta is not framed before the prompt:\n%s", lastUser)
	}

	// Fork onto pi at an earlier seq (after Claude's first turn); the
	// original is untouched.
	before := r.messages(sess.Id)
	firstTurnEnd := int64(0)
	for _, m := range before {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT {
			firstTurnEnd = m.Seq
			break
		}
	}
	fork, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: sess.Id, AtSeq: firstTurnEnd, Agent: "pi", Model: "fake/fake-model", RequestId: "fork-1"})
	if err != nil {
		t.Fatal(err)
	}
	if fork.ParentId != sess.Id || fork.RootId != sess.Id || fork.ForkedAtSeq != firstTurnEnd || fork.Agent != "pi" {
		t.Fatalf("fork lineage: %+v", fork)
	}
	again, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: sess.Id, AtSeq: firstTurnEnd, Agent: "pi", RequestId: "fork-1"})
	if err != nil || again.Id != fork.Id || again.LastSeq != fork.LastSeq {
		t.Fatalf("retried fork: %v %v", again, err)
	}
	seq = r.send(fork.Id, "on pi now MARK-P1")
	r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns = r.fake.Turns()
	piReq := turns[len(turns)-1]
	assertItems(t, piReq.Items, "MARK-C1", "sw-tool-ok", "MARK-P1")
	for _, it := range piReq.Items {
		if strings.Contains(it.Text, "MARK-X1") {
			t.Fatal("the fork at an earlier seq carried later messages")
		}
	}
	if after := r.messages(sess.Id); len(after) != len(before) {
		t.Fatalf("the fork changed its parent: %d -> %d messages", len(before), len(after))
	}

	// A worker on Gemini reports back to its parent.
	worker, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "gemini", ParentId: sess.Id, Text: "check the docs MARK-G1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(worker.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	testharness.WaitFor(t, 2*time.Minute, "the parent hears from its Gemini worker", func() bool {
		for _, m := range r.messages(sess.Id) {
			if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER && strings.Contains(m.Text, "Worker "+worker.Id+" (Gemini CLI) finished") {
				return true
			}
		}
		return false
	})
	_, err = r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: sess.Id, AtSeq: 9999})
	if client.ReasonOf(err) != "INVALID_ARGUMENT" {
		t.Fatalf("fork past the tip: %v", err)
	}
}

// After Claude -> Codex -> Claude, the Claude turn that should get the
// handoff is refused (400); the next turn still carries what Claude missed,
// and the refused prompt never reaches the model again.
func TestRefusedHandoffTurnRetried(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "codex")
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "start MARK-R1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	if _, err := r.c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: sess.Id, Agent: "codex"}); err != nil {
		t.Fatal(err)
	}
	seq := r.send(sess.Id, "codex part MARK-RX")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	if _, err := r.c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: sess.Id, Agent: "claude"}); err != nil {
		t.Fatal(err)
	}
	r.fake.FailNext(1, 400)
	seq = r.send(sess.Id, "refused MARK-R2")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_FAILED, seq-1)
	seq = r.send(sess.Id, "retry MARK-R3")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	turns := r.fake.Turns()
	last := turns[len(turns)-1]
	if last.API != "anthropic" {
		t.Fatalf("last request went to %s", last.API)
	}
	assertItems(t, last.Items, "MARK-R1", "codex part MARK-RX", "retry MARK-R3")
	if n := strings.Count(fmtItems(last.Items), "refused MARK-R2"); n != 0 {
		t.Fatalf("the refused prompt reached the model %d times after it failed", n)
	}
}
