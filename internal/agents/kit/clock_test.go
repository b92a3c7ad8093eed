package kit

import (
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/transcript"
)

func TestClock(t *testing.T) {
	fixed := time.Unix(5, 0)
	if Clock(func() time.Time { return fixed })() != fixed || Clock(nil)().Before(fixed) {
		t.Fatal("Clock")
	}
}

func TestISOTime(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 890_123_456, time.FixedZone("x", 3600))
	if got, want := ISOTime(at), "2025-03-04T04:06:07.890Z"; got != want {
		t.Fatalf("ISOTime = %q, want %q", got, want)
	}
}

func TestMessageTimes(t *testing.T) {
	now, t1, t2 := time.Unix(100, 0), time.Unix(1, 0), time.Unix(2, 0)
	mt := MessageTimes{Now: now}
	var got []time.Time
	for _, at := range []time.Time{{}, t1, {}, t2, {}} {
		got = append(got, mt.Of(&transcript.Message{Time: at}))
	}
	// Before any time, Now; after one, the one before.
	want := []time.Time{now, t1, t1, t2, t2}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Fatalf("times = %v, want %v", got, want)
		}
	}
}
