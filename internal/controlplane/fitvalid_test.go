package controlplane

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/adopt"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/wire"
)

// hostile are values a native file from outside cast may hold in any of
// the strings a reader takes from it: a hand edit, another writer, a CLI
// of another version.
var hostile = []string{"", "ok", "toolu_01", "a\nb", "tab\there", "\x1b[31mred", "del\x7f", "\xff\xfeLatin-1 \xe9",
	"nel\u0085", "nul\x00", "bidi\u202e", strings.Repeat("x", 600), strings.Repeat("é", 300), "sp ace", "ü"}

// Every row a node sends (its own turn's sync and adoption both send
// adopt.Fit's form) passes the API's checks, whatever the native file
// held: a row refused for one field failed its batch at every try, and
// nothing after it was kept (adoption) or the turn's rows were given up
// (sync). Seeded, so a failure names the row that failed.
func TestFittedRowsPassValidation(t *testing.T) {
	kinds := []transcript.Kind{transcript.KindUser, transcript.KindAssistant, transcript.KindThinking,
		transcript.KindToolCall, transcript.KindToolResult, transcript.KindNotice, transcript.KindInternal}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return hostile[rng.IntN(len(hostile))] }
	failed := 0
	for i := range 5000 {
		m := transcript.Message{Kind: kinds[rng.IntN(len(kinds))], ClientID: fmt.Sprintf("adopt.%d", i),
			// The agent and the account are the node's; the rest is the file's.
			Text: pick(), Agent: "claude", Model: pick(), Account: "work", NativeID: pick(),
			Time: time.Now().Add(-time.Hour)}
		switch m.Kind {
		case transcript.KindToolCall:
			m.ToolCall = &transcript.ToolCall{ID: pick(), Name: pick(), Input: pick()}
		case transcript.KindToolResult:
			m.ToolResult = &transcript.ToolResult{CallID: pick(), Output: pick()}
		case transcript.KindNotice:
			m.NoticeType = transcript.NoticeCompactionSummary
		}
		p := wire.ToProto(adopt.Fit(m, 0))
		if err := validMessages([]*castv1.Message{p}, maxAppendBatch, true); err != nil {
			t.Errorf("row %d (%s) refused after Fit: %.300v", i, m.Kind, err)
			if failed++; failed == 10 {
				t.FailNow()
			}
		}
	}
}
