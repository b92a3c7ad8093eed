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
		Failures: on(reg).counterVec("cast_agent_canary_failures_total",
			"Failed conformance checks of an installed agent CLI recorded, by agent and capability.", "agent", "capability"),
	}
	Preinit(m.Failures, agents, capabilities)
	return m
}
