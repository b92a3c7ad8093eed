package retention

// SetPage makes w read n session records at a time, so a test sweeps
// several pages of a few sessions.
func SetPage(w *Sweeper, n int) { w.page = n }
