package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/codecs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/wire"
)

// BenchmarkSwitch10k measures an agent switch on a 10k-message session,
// from the switch command until the target CLI's first request reaches the
// model (the node rebuilds the native transcript, starts the CLI, the CLI
// loads it), next to the time to write that native transcript alone, in
// the same run. Real node process, real CLIs, fake model.
//
//	go test -run '^$' -bench Switch10k -benchtime 3x ./internal/e2e
func BenchmarkSwitch10k(b *testing.B) {
	r := newTurnRig(b, "claude", "codex")
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: b.TempDir(), HistoryMessages: 10000})
	if err != nil {
		b.Fatal(err)
	}
	msgs := benchConversation(10000)
	for i := 0; i < len(msgs); i += 500 {
		var batch []*castv1.Message
		for _, m := range msgs[i:min(i+500, len(msgs))] {
			m.ClientID = ids.NewClientID()
			batch = append(batch, wire.ToProto(m))
		}
		if _, err := r.c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: batch}); err != nil {
			b.Fatal(err)
		}
	}
	targets := []string{"codex", "claude"}
	var switchTotal, writeTotal time.Duration
	b.ResetTimer()
	for i := range b.N {
		to := targets[i%2]
		before := len(r.fake.Turns())
		start := time.Now()
		if _, err := r.c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: sess.Id, Agent: to}); err != nil {
			b.Fatal(err)
		}
		seq := r.send(sess.Id, fmt.Sprintf("switch %d", i))
		testharness.WaitFor(b, 5*time.Minute, "the target's first request", func() bool { return len(r.fake.Turns()) > before })
		switchTotal += time.Since(start)
		r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)

		b.StopTimer()
		w, err := codecs.Writer(to, codecs.WriterOptions{})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := w.Write(agents.Target{Home: b.TempDir(), Cwd: b.TempDir(), SessionID: "bench"}, msgs); err != nil {
			b.Fatal(err)
		}
		writeTotal += time.Since(t0)
		b.StartTimer()
	}
	b.ReportMetric(float64(switchTotal.Milliseconds())/float64(b.N), "switch_ms")
	b.ReportMetric(float64(writeTotal.Milliseconds())/float64(b.N), "native_write_ms")
	b.ReportMetric(float64(switchTotal)/float64(writeTotal), "switch/write")
}

// benchConversation is n messages of turns with tool calls.
func benchConversation(n int) []transcript.Message {
	out := make([]transcript.Message, 0, n)
	code := int32(0)
	for i := 0; len(out) < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		out = append(out,
			transcript.Message{Kind: transcript.KindUser, Text: fmt.Sprintf("step %d: look at file %d", i, i)},
			transcript.Message{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: id, Name: "Bash", Input: fmt.Sprintf(`{"command":"cat f%d.go"}`, i)}},
			transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: "package main // some output of moderate size", ExitCode: &code}},
			transcript.Message{Kind: transcript.KindAssistant, Text: fmt.Sprintf("file %d looks fine", i), Model: "claude-sonnet-4-5"},
		)
	}
	return out[:n]
}
