package controlplane

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

// etcdGatherer exposes the default registry's etcd_* families (embedded
// etcd registers there) without the Go runtime metrics cast's own registry
// already has. With lint it leaves out the families Prometheus's linter
// refuses (etcd names some gauges *_total, some counters without it, and
// uses milliseconds), so `promtool check metrics` passes on /metrics.
type etcdGatherer struct{ lint bool }

func (g etcdGatherer) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := prometheus.DefaultGatherer.Gather()
	out := mfs[:0]
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "etcd_") {
			out = append(out, mf)
		}
	}
	if !g.lint {
		return out, err
	}
	problems, lerr := promlint.NewWithMetricFamilies(out).Lint()
	if lerr != nil {
		return nil, lerr
	}
	bad := map[string]bool{}
	for _, p := range problems {
		bad[p.Metric] = true
	}
	clean := out[:0]
	for _, mf := range out {
		if !bad[mf.GetName()] {
			clean = append(clean, mf)
		}
	}
	return clean, err
}
