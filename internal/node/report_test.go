package node

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/validate"
)

// A turn's failure reason comes from the CLI's stderr (clipped by bytes
// in the runner too); whatever it holds, the reason the node keeps and
// sends must be one the control plane takes. One cut in the middle of a
// character, or stderr that is not UTF-8, was not: the ReportTurn request
// failed to marshal, the pending report was sent again forever, and the
// worker, which flushes it before each turn, left the session `running`
// with no turn behind it and never ran another.
func TestClipReasonIsAlwaysReportable(t *testing.T) {
	for _, tc := range []struct{ name, reason string }{
		{"cut inside a character", "x" + strings.Repeat("é", 600)},
		{"cut inside a wide character", "xx" + strings.Repeat("日本", 400)},
		{"latin-1 stderr", "erreur: fichier introuvable \xe9t\xe9"},
		{"NUL in stderr", "exit 1: bad\x00byte"},
		{"plain", "exit 1: not logged in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clipReason(tc.reason)
			if err := validate.Check(validate.Reason, "state_reason", got); err != nil {
				t.Errorf("clipReason(%s) is refused: %v", validate.Show(tc.reason), err)
			}
			if _, err := proto.Marshal(&castv1.ReportTurnRequest{StateReason: got}); err != nil {
				t.Errorf("a report with clipReason(%s) cannot be sent: %v", validate.Show(tc.reason), err)
			}
			if len(got) > 1000+len("…") {
				t.Errorf("clipReason kept %d bytes", len(got))
			}
		})
	}
	if got := clipReason("exit 1: not logged in"); got != "exit 1: not logged in" {
		t.Errorf("a short valid reason was changed: %q", got)
	}
}
