package opencode

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// BenchmarkWrite100k renders a 100k-message conversation as the export
// document (what the loader hands to `opencode import`; the import itself is
// OpenCode's time) next to plain encoding/json of the same messages; MB/s is
// over the neutral JSON size in both.
func BenchmarkWrite100k(b *testing.B) {
	msgs := agenttest.LoremConversation(100_000)
	agenttest.BenchVersusJSON(b, msgs, "opencode-export", func(b *testing.B) {
		for b.Loop() {
			ex, err := Render(tgt, msgs, RenderOptions{Model: fakeModel, Now: fixedNow})
			if err != nil {
				b.Fatal(err)
			}
			if err := WriteExport(io.Discard, ex); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestWriteExportMatchesMarshal(t *testing.T) {
	ex, err := Render(tgt, agenttest.LoremConversation(50), RenderOptions{Model: fakeModel, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteExport(&b, ex); err != nil {
		t.Fatal(err)
	}
	var back Export
	if err := json.Unmarshal([]byte(b.String()), &back); err != nil {
		t.Fatal(err)
	}
	if string(marshal(back)) != string(marshal(ex)) {
		t.Error("streamed document differs")
	}
	t.Logf("export is %d bytes for %d neutral JSON bytes", b.Len(), len(marshal(agenttest.LoremConversation(50))))
}
