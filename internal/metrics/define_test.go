package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Preinit exports every combination of the label values, and nothing else.
func TestPreinit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values [][]string
		want   int
	}{
		{"one label", [][]string{{"a", "b", "c"}}, 3},
		{"two labels", [][]string{{"a", "b"}, {"x", "y", "z"}}, 6},
		{"an empty list", [][]string{{"a", "b"}, {}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			labels := []string{"l0", "l1"}[:len(tc.values)]
			v := on(nil).counterVec("cast_test_total", "test", labels...)
			Preinit(v, tc.values...)
			if got := Series(v); got != tc.want {
				t.Fatalf("%d series, want %d", got, tc.want)
			}
		})
	}
	h := on(prometheus.NewRegistry()).histogramVec("cast_test_seconds", "test", []float64{1}, "outcome")
	Preinit(h, PermissionOutcomes)
	if got := Series(h); got != len(PermissionOutcomes) {
		t.Fatalf("histogram: %d series", got)
	}
}
