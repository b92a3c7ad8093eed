package kit

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	fixed := time.Unix(5, 0)
	if Clock(func() time.Time { return fixed })() != fixed || Clock(nil)().Before(fixed) {
		t.Fatal("Clock")
	}
}
