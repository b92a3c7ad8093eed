package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value reads one counter's or gauge's value, or a histogram's count of
// observations (-1 when it cannot be read):
// tests check metrics with it.
func Value(m prometheus.Metric) float64 {
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		return -1
	}
	if pb.Counter != nil {
		return pb.Counter.GetValue()
	}
	if pb.Histogram != nil {
		return float64(pb.Histogram.GetSampleCount())
	}
	return pb.Gauge.GetValue()
}

// Series counts the series a collector has now.
func Series(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}
