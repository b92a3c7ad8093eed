package retention

import (
	"fmt"
	"time"
)

// Config is the retention policy and how often a replica applies it.
type Config struct {
	Policy Policy
	// Every is how often the sweep runs; each run reads every session
	// record, and the newest message of those idle past their window.
	Every time.Duration
	// DryRun (--retain-dry-run): the sweep reports what it would purge (a
	// log line each, cast_retention_would_purge_sessions) and purges
	// nothing, so a policy can be checked against the sessions it covers
	// before it deletes anything.
	DryRun bool
}

// DefaultConfig returns the defaults: no rules (nothing is ever purged),
// an hourly sweep once rules are given.
func DefaultConfig() Config {
	return Config{Every: time.Hour}
}

// Validate checks c.
func (c Config) Validate() error {
	if err := c.Policy.Validate(); err != nil {
		return fmt.Errorf("--retain: %w", err)
	}
	if c.Every < time.Minute {
		return fmt.Errorf("--retain-every must be at least a minute")
	}
	return nil
}
