package web

import "time"

// SetClock sets what Logins takes as now (tests move it past lifetimes).
func (l *Logins) SetClock(now func() time.Time) { l.now = now }

// SetStoreTimeout sets how long Logins waits for each store call (tests
// shorten it).
func (l *Logins) SetStoreTimeout(d time.Duration) { l.grants.timeout = d }

// SetIdleTimeout sets how long the listener keeps an idle connection
// (tests shorten it).
func (c *Config) SetIdleTimeout(d time.Duration) { c.idleTimeout = d }

// SetCallTimeout sets the deadline a unary API call without one gets
// (tests shorten it).
func (h *Handler) SetCallTimeout(d time.Duration) { h.callTimeout = d }

// SetCallLimits sets the unary methods' own longest waits (Config.CallLimits).
func (h *Handler) SetCallLimits(m map[string]time.Duration) { h.callLimits = m }
