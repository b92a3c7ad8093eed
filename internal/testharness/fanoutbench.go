package testharness

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// FanoutSizes are the watcher counts the fan-out benchmarks measure
// (internal/fanout, internal/controlplane): 10 (the baseline), 1,000 and
// 10,000; with -short, up to 1,000.
func FanoutSizes() []int {
	if testing.Short() {
		return []int{10, 1000}
	}
	return []int{10, 1000, 10000}
}

// FanoutLatency reports the p50 and p99 of one size's latencies (every
// watcher of every append) as metrics named for n, and the p99 against
// base, the baseline size's p99 (0: this is the baseline); it returns the
// p99 and a line for the log.
func FanoutLatency(b *testing.B, n int, lat []time.Duration, base time.Duration) (time.Duration, string) {
	s := slices.Clone(lat)
	slices.Sort(s)
	p50, p99 := s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
	if base == 0 {
		base = p99
	}
	ratio := float64(p99) / float64(base)
	b.ReportMetric(float64(p50)/1e6, fmt.Sprintf("p50_ms_n%d", n))
	b.ReportMetric(float64(p99)/1e6, fmt.Sprintf("p99_ms_n%d", n))
	b.ReportMetric(ratio, fmt.Sprintf("p99_ratio_n%d_vs_base", n))
	return p99, fmt.Sprintf("%6d watchers: p50 %7.2f ms  p99 %7.2f ms  p99 %5.2fx the baseline's", n, float64(p50)/1e6, float64(p99)/1e6, ratio)
}
