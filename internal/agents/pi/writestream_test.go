package pi

import (
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// Restoring a large session from its spool holds about a record, not the
// session (issue 27's 100,000-message case).
func TestWriteStreamHoldsARecordNotTheSession(t *testing.T) {
	agenttest.WriteStreamHoldsARecord(t, Writer{}, func() agents.Target { return target(t) })
}
