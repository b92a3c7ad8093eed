package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// def creates metrics registered on one registerer (nil: unregistered):
// every family is a name, a help text and its labels, so the definitions
// below say only that.
type def struct{ f promauto.Factory }

func on(reg prometheus.Registerer) def { return def{promauto.With(reg)} }

func (d def) counter(name, help string) prometheus.Counter {
	return d.f.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func (d def) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return d.f.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func (d def) gauge(name, help string) prometheus.Gauge {
	return d.f.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

func (d def) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return d.f.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func (d def) histogram(name, help string, buckets []float64) prometheus.Histogram {
	return d.f.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

func (d def) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return d.f.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// Preinit exports every combination of the label values at 0 (a counter or
// gauge at 0, a histogram with no observations), so rate(), increase() and
// alerts see the first event instead of a series appearing with it.
func Preinit[M any, V interface{ WithLabelValues(...string) M }](v V, values ...[]string) {
	var walk func(prefix []string, rest [][]string)
	walk = func(prefix []string, rest [][]string) {
		if len(rest) == 0 {
			v.WithLabelValues(prefix...)
			return
		}
		for _, x := range rest[0] {
			walk(append(prefix[:len(prefix):len(prefix)], x), rest[1:])
		}
	}
	walk(nil, values)
}
