package kit

import "time"

// Clock is now, or time.Now when now is nil (writers' Now fields).
func Clock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}
