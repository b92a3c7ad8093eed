package codex

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// bigConversation is n messages cycling user, assistant, tool call, tool
// result, with texts of a few hundred bytes.
func bigConversation(n int) []transcript.Message {
	msgs := make([]transcript.Message, 0, n)
	pad := strings.Repeat("lorem ipsum ", 20)
	for i := 0; len(msgs) < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			user(fmt.Sprintf("u%d %s", i, pad)),
			asst(fmt.Sprintf("a%d %s", i, pad)),
			call(id, "Bash", fmt.Sprintf(`{"command":"echo %d"}`, i)),
			result(id, fmt.Sprintf("%d %s", i, pad), i32(0)))
	}
	return msgs[:n]
}

// BenchmarkWrite100k writes a 100k-message conversation as a rollout next to
// plain encoding/json of the same messages; MB/s is over the neutral JSON
// size in both, so the two figures compare directly.
func BenchmarkWrite100k(b *testing.B) {
	msgs := bigConversation(100_000)
	raw, _ := json.Marshal(msgs)
	b.Run("json-baseline", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := json.Marshal(msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codex-rollout", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
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
