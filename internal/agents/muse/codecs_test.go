package muse_test

import (
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/codecs"
)

// TestRegistered checks that `cast import --agent muse` finds this reader,
// and that Muse still has no writer (it cannot take over history).
func TestRegistered(t *testing.T) {
	r, err := codecs.Reader("muse")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.Read("testdata/session-basic.jsonl")
	if err != nil || len(msgs) != 4 {
		t.Fatalf("read %d messages, %v", len(msgs), err)
	}
	if _, err := codecs.Writer("muse", codecs.WriterOptions{}); err == nil || !strings.Contains(err.Error(), "do not take over history") {
		t.Fatalf("muse writer: %v", err)
	}
}
