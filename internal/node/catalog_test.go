package node

// The agents register from their own packages, which the binaries link
// through the catalog; these tests run agents by name, so they link it too.
import _ "github.com/cast-dev/cast/internal/agents/codecs"
