package metrics

import "github.com/prometheus/client_golang/prometheus"

// Canary holds the conformance canaries' metrics on the control plane.
// Labels are bounded: registered agent names and the canary's fixed
// capabilities (write, resume, append, read, fork).
type Canary struct {
	Failures *prometheus.CounterVec // agent, capability
}

// NewCanary creates and registers the canary metrics, every agent and
// capability exported at 0 so an alert sees the first failure.
func NewCanary(reg prometheus.Registerer, agents, capabilities []string) *Canary {
	m := &Canary{
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cast_agent_canary_failures_total", Help: "Failed conformance checks of an installed agent CLI recorded, by agent and capability.",
		}, []string{"agent", "capability"}),
	}
	register(reg, m.Failures)
	for _, a := range agents {
		for _, c := range capabilities {
			m.Failures.WithLabelValues(a, c)
		}
	}
	return m
}
