package codex

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Usage reads only the rollout's tail and takes the last rate_limits
// there; a line cut by the tail's start is skipped.
func TestCodexUsageReadsTheTail(t *testing.T) {
	line := func(pct float64) string {
		return fmt.Sprintf(`{"type":"event_msg","payload":{"type":"token_count","rate_limits":{"primary":{"used_percent":%v,"window_minutes":300,"resets_at":1900000000}}}}`+"\n", pct)
	}
	var b strings.Builder
	b.WriteString(line(10))
	pad := `{"type":"response_item","payload":{"type":"message","text":"` + strings.Repeat("x", 1000) + `"}}` + "\n"
	for b.Len() < codexTail+codexTail/2 {
		b.WriteString(pad)
	}
	b.WriteString(line(50))
	b.WriteString(pad)
	path := filepath.Join(t.TempDir(), "rollout.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	got := (Driver{}).Usage(path)
	if len(got) != 1 || got[0].UsedPercent != 50 || got[0].WindowMinutes != 300 || got[0].ResetsAt.Unix() != 1900000000 {
		t.Fatalf("usage %+v", got)
	}
	if got := (Driver{}).Usage(filepath.Join(t.TempDir(), "none.jsonl")); got != nil {
		t.Fatalf("missing rollout: %+v", got)
	}
}
