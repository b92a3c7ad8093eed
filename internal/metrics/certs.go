package metrics

import (
	"crypto/x509"
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Values of cast_cert_expiry_timestamp_seconds's cert label.
const (
	CertCA      = "ca"      // the CA that signs now (control plane)
	CertServing = "serving" // the control plane's gRPC and metrics certificate
	CertClient  = "client"  // a node's client certificate
)

// certExpiry exports cast_cert_expiry_timestamp_seconds{cert}: when each
// certificate the daemon holds expires, read at every scrape, so a
// renewal or a CA rotation shows at once. A certificate the daemon does
// not hold yet (a node before its first join) has no series: alerts on
// expiry say nothing about a daemon that has none.
type certExpiry struct {
	desc  *prometheus.Desc
	certs map[string]func() *x509.Certificate
}

// NewCertExpiry registers the expiry gauge of certs (by cert label) on reg.
func NewCertExpiry(reg prometheus.Registerer, certs map[string]func() *x509.Certificate) {
	reg.MustRegister(&certExpiry{
		desc: prometheus.NewDesc("cast_cert_expiry_timestamp_seconds",
			"When a certificate this daemon holds expires (Unix seconds), by cert: ca, serving, client.", []string{"cert"}, nil),
		certs: certs,
	})
}

func (c *certExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *certExpiry) Collect(ch chan<- prometheus.Metric) {
	for _, name := range slices.Sorted(maps.Keys(c.certs)) {
		if cert := c.certs[name](); cert != nil {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(cert.NotAfter.Unix()), name)
		}
	}
}
