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

// The writer every caller gets (agents.WriterFor: `cast restore`, the
// node's rebuilds) streams too: it cuts at a compaction summary, and its
// wrapper hid StreamWriter, so a restore read the whole session.
func TestRegisteredWriterStreams(t *testing.T) {
	w, err := agents.WriterFor("pi", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	agenttest.WriteStreamHoldsARecord(t, w, func() agents.Target { return target(t) })
}
