package pi

import (
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// BenchmarkWrite100k writes a 100k-message conversation natively and, in
// the same run, as plain encoding/json, both reported in MB/s of output.
func BenchmarkWrite100k(b *testing.B) {
	agenttest.BenchWrite100k(b, Writer{})
}
