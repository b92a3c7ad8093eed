package fanout

import "fmt"

// Defaults.
const (
	// DefaultBuffer is how many live events wait for one watcher before it
	// counts as fallen behind (and catches up from the store). Events are
	// shared pointers, and only waiting ones take room (8 bytes each).
	DefaultBuffer = 256
	// DefaultMaxPerPrincipal is how many session watches one principal may
	// hold open on a replica: enough for a UI showing every session of a
	// large fleet, few enough that one runaway script cannot take a
	// replica's memory (each watch is a gRPC stream and its goroutine).
	DefaultMaxPerPrincipal = 1000
)

// Config tunes a Hub.
type Config struct {
	Buffer          int // live events queued per watcher
	MaxPerPrincipal int // open session watches per principal (admins too)
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Buffer: DefaultBuffer, MaxPerPrincipal: DefaultMaxPerPrincipal}
}

// Validate checks c.
func (c Config) Validate() error {
	switch {
	case c.Buffer < 1 || c.Buffer > 1<<16:
		return fmt.Errorf("--watch-buffer %d must be in [1,65536]", c.Buffer)
	case c.MaxPerPrincipal < 1:
		return fmt.Errorf("--max-watches %d must be positive", c.MaxPerPrincipal)
	}
	return nil
}
