package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/mcpserver"
	"github.com/cast-dev/cast/internal/testharness"
)

// The permission tool (what Claude Code's --permission-prompt-tool calls)
// puts the session in waiting_permission and blocks until a person answers
// through the control plane; the history tool pages the thread.
func TestPermissionAndHistoryTools(t *testing.T) {
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	testharness.StartNode(t, srv.Addr(), "n1", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The node is connected before the session is made: an import stored
	// while no node is connected is adopted later, and the node's report of
	// it (idle) could land after this test set the session's state.
	testharness.WaitFor(t, 20*time.Second, "node n1 connected", func() bool {
		resp, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
		return err == nil && len(resp.Nodes) == 1 && resp.Nodes[0].Connected
	})
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "grok", HistoryMessages: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"one", "two", "three"} {
		if _, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: []*castv1.Message{
			{ClientId: "h-" + text, Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "msg " + text}}}); err != nil {
			t.Fatal(err)
		}
	}

	st, ct := mcp.NewInMemoryTransports()
	server := mcpserver.New(c, mcpserver.Config{SessionID: sess.Id, Version: "test"})
	go func() { _ = server.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "claude-like"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	hist, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "history", Arguments: map[string]any{"before_seq": 3, "limit": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if text := hist.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "#2 user: msg two") || strings.Contains(text, "msg three") || !strings.Contains(text, "before_seq=2") {
		t.Fatalf("history page:\n%s", text)
	}

	// Call is the same tool through a one-shot in-process client (`cast
	// mcp call`, pi's bridge): same page, arguments checked by the tool's
	// schema, tools outside the served set refused.
	histOnly := mcpserver.Config{SessionID: sess.Id, Version: "test", Tools: []string{mcpserver.HistoryTool}}
	text, err := mcpserver.Call(ctx, c, histOnly, mcpserver.HistoryTool, json.RawMessage(`{"before_seq":3,"limit":1}`))
	if err != nil || !strings.Contains(text, "#2 user: msg two") || strings.Contains(text, "msg three") {
		t.Fatalf("Call history: %q, %v", text, err)
	}
	for _, bad := range []struct{ tool, args, want string }{
		{mcpserver.PermissionTool, `{}`, "unknown tool"},
		{mcpserver.HistoryTool, `[1]`, "not a JSON object"},
		{mcpserver.HistoryTool, `{"limit":"ten"}`, "limit"},
	} {
		if _, err := mcpserver.Call(ctx, c, histOnly, bad.tool, json.RawMessage(bad.args)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Call(%s, %s) = %v, want %q", bad.tool, bad.args, err, bad.want)
		}
	}

	ask := func(tool string) chan map[string]any {
		out := make(chan map[string]any, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.PermissionTool,
				Arguments: map[string]any{"tool_name": tool, "input": map[string]any{"command": "rm -rf build"}, "tool_use_id": "toolu_" + tool}})
			var v map[string]any
			if err == nil {
				_ = json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &v)
			}
			out <- v
		}()
		return out
	}
	waitState := func(want castv1.SessionState) *castv1.Session {
		var got *castv1.Session
		testharness.WaitFor(t, 20*time.Second, want.String(), func() bool {
			got, _ = c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
			return got != nil && got.State == want
		})
		return got
	}

	allowed := ask("Bash")
	w := waitState(castv1.SessionState_SESSION_STATE_WAITING_PERMISSION)
	if !strings.Contains(w.StateReason, "Bash") || !strings.Contains(w.StateReason, "rm -rf build") {
		t.Fatalf("waiting reason %q", w.StateReason)
	}
	select {
	case <-allowed:
		t.Fatal("answered before anyone approved")
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := c.Sessions.AnswerPermission(ctx, &castv1.AnswerPermissionRequest{SessionId: sess.Id, Allow: true}); err != nil {
		t.Fatal(err)
	}
	if v := <-allowed; v["behavior"] != "allow" || v["updatedInput"].(map[string]any)["command"] != "rm -rf build" {
		t.Fatalf("allow answer %v", v)
	}
	waitState(castv1.SessionState_SESSION_STATE_RUNNING)

	denied := ask("Write")
	waitState(castv1.SessionState_SESSION_STATE_WAITING_PERMISSION)
	if _, err := c.Sessions.AnswerPermission(ctx, &castv1.AnswerPermissionRequest{SessionId: sess.Id, Allow: false, Message: "not today"}); err != nil {
		t.Fatal(err)
	}
	if v := <-denied; v["behavior"] != "deny" || v["message"] != "not today" {
		t.Fatalf("deny answer %v", v)
	}
	if _, err := c.Sessions.AnswerPermission(ctx, &castv1.AnswerPermissionRequest{SessionId: sess.Id, Allow: true}); err == nil || !strings.Contains(err.Error(), "no pending permission request") {
		t.Fatalf("answer with nothing pending: %v", err)
	}
}
