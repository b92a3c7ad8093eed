package agenttest

import (
	"reflect"
	"testing"

	"github.com/cast-dev/cast/internal/transcript"
)

// CheckReport fails t unless a reader kept msgs reading as want ("kind
// text", one a message) and reported skipped as wantSkipped: what a
// reader keeps and what it says it left out are checked together.
func CheckReport(t testing.TB, msgs []transcript.Message, skipped map[string]int, want []string, wantSkipped map[string]int) {
	t.Helper()
	var got []string
	for _, m := range msgs {
		got = append(got, m.Kind.String()+" "+m.Text)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kept %q, want %q", got, want)
	}
	if len(skipped) == 0 && len(wantSkipped) == 0 {
		return
	}
	if !reflect.DeepEqual(skipped, wantSkipped) {
		t.Errorf("skipped %v, want %v", skipped, wantSkipped)
	}
}
