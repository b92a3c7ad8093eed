package fleet

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cast-dev/cast/internal/quota"
)

// Bounds on the usage gauges' series: accounts labelled by name per agent,
// windows per account.
const (
	maxNamedAccounts = 32
	maxGaugeWindows  = 8
)

// gauges sets the usage gauges for agent's accounts (the sweep calls it).
// Account names are labels only when the operator allows it; otherwise the
// active account is "active" and the one a switch would pick is "best".
func (mg *Manager) gauges(agent string, accounts []*quota.Account, active string, now time.Time) {
	m := mg.m
	for _, v := range []*prometheus.GaugeVec{m.UsagePercent, m.UsageResetSeconds, m.UsageAgeSeconds} {
		v.DeletePartialMatch(prometheus.Labels{"agent": agent})
	}
	labelled := map[string]*quota.Account{}
	best := Pick(accounts, active, now)
	for _, a := range accounts {
		switch {
		case mg.cfg.MetricsAccountNames:
			if len(labelled) < maxNamedAccounts {
				labelled[a.Name] = a
			}
		case a.Name == active:
			labelled["active"] = a
		case a.Name == best:
			labelled["best"] = a
		}
	}
	for label, a := range labelled {
		if a.UsageAt.IsZero() {
			continue
		}
		m.UsageAgeSeconds.WithLabelValues(agent, label).Set(now.Sub(a.UsageAt).Seconds())
		for _, w := range a.Usage[:min(len(a.Usage), maxGaugeWindows)] {
			m.UsagePercent.WithLabelValues(agent, label, w.Name).Set(w.UsedAt(now))
			if w.Open(now) && !w.ResetsAt.IsZero() {
				m.UsageResetSeconds.WithLabelValues(agent, label, w.Name).Set(w.ResetsAt.Sub(now).Seconds())
			}
		}
	}
}
