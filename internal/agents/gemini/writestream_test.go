package gemini

import (
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// Restoring a large session from its spool holds about a record, not the
// session (issue 27: a 417 MiB session's restore peaked at 1.9 GB).
func TestWriteStreamHoldsARecordNotTheSession(t *testing.T) {
	agenttest.WriteStreamHoldsARecord(t, Writer{}, func() agents.Target { return target(t) })
}
