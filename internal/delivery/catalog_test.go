package delivery

// The agents' registry entries are their own packages'; these tests name
// every agent, so they link them all.
import _ "github.com/cast-dev/cast/internal/agents/codecs"
