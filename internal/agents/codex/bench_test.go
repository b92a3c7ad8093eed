package codex

import (
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// BenchmarkWrite100k writes a 100k-message conversation as a rollout next to
// plain encoding/json of the same messages; MB/s is over the neutral JSON
// size in both, so the two figures compare directly.
func BenchmarkWrite100k(b *testing.B) {
	msgs := agenttest.LoremConversation(100_000)
	agenttest.BenchVersusJSON(b, msgs, "codex-rollout", func(b *testing.B) {
		w := Writer{Now: fixedNow}
		for b.Loop() {
			b.StopTimer()
			tg := agents.Target{Home: b.TempDir(), Cwd: "/work/project", SessionID: "ses-bench"}
			b.StartTimer()
			if _, err := w.Write(tg, msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
