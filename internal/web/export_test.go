package web

import "time"

// SetClock sets what Logins takes as now (tests move it past lifetimes).
func (l *Logins) SetClock(now func() time.Time) { l.now = now }
