package canary

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/capability"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/validate"
)

// A failed check's detail quotes the CLI (its stderr, its output), clipped
// by bytes; the node records it with RecordAgentChecks, which takes only
// valid UTF-8 without NUL. A detail cut inside a character could not even
// be marshalled: the verdicts were never recorded, and the node ran the
// whole canary (real CLI turns) again at every look.
func TestFailDetailIsRecordable(t *testing.T) {
	for _, out := range []string{
		"x" + strings.Repeat("é", 400),
		"stderr: \xe9chec",
		"bad\x00byte",
	} {
		c := failf(capability.Write, "the CLI said: %s", out)
		if err := validate.Check(validate.Reason, "detail", c.Detail); err != nil {
			t.Errorf("detail of %s is refused: %v", validate.Show(out), err)
		}
		if _, err := proto.Marshal(&castv1.AgentCheck{Detail: c.Detail}); err != nil {
			t.Errorf("detail of %s cannot be sent: %v", validate.Show(out), err)
		}
	}
}
