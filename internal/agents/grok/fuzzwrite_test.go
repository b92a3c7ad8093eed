package grok

import (
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// FuzzWriteRead checks that whatever the neutral copy holds, the writer
// produces a file the reader reads back with every user turn, every call
// paired with a result after it, and nothing invalid.
func FuzzWriteRead(f *testing.F) {
	agenttest.FuzzWriteRead(f, Writer{}, Reader{}, agenttest.CheckWellFormed)
}
