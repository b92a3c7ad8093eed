package opencode

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/transcript"
)

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

// BenchmarkWrite100k renders a 100k-message conversation as the export
// document (what the loader hands to `opencode import`; the import itself is
// OpenCode's time) next to plain encoding/json of the same messages; MB/s is
// over the neutral JSON size in both.
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
	b.Run("opencode-export", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
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
	ex, err := Render(tgt, bigConversation(50), RenderOptions{Model: fakeModel, Now: fixedNow})
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
	t.Logf("export is %d bytes for %d neutral JSON bytes", b.Len(), len(marshal(bigConversation(50))))
}
