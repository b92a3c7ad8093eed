package muse

import "github.com/cast-dev/cast/internal/agents"

// Muse's records are runtime events cast can read but not author.
func init() { agents.RegisterCodec("muse", agents.Codec{Reader: Reader{}}) }
