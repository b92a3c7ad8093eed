package metrics

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// HTTPServer is a daemon's server of /metrics, /healthz and /readyz on h:
// HTTPS with tlsCfg (the daemon's own certificate, from the cluster CA),
// plain HTTP when it is nil (--insecure only).
func HTTPServer(h http.Handler, tlsCfg *tls.Config) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, TLSConfig: tlsCfg}
}

// ServeHTTP serves srv on lis until it is shut down: TLS when srv has a
// TLS config (a plain HTTP request gets 400 and nothing else).
func ServeHTTP(srv *http.Server, lis net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(lis, "", "")
	}
	return srv.Serve(lis)
}
