package fakemodel_test

// The agents' registry entries are their own packages'; these tests run
// every agent's real CLI, so they link them all.
import _ "github.com/cast-dev/cast/internal/agents/codecs"
