// Package netaddr says what an address or URL cast is given reaches: this
// machine only (loopback), or a network. The control plane's config, the
// embedded etcd, dev mode and the CLI refuse the same things with it; it
// imports no gRPC, so the cores that check an address link none either.
package netaddr

import (
	"fmt"
	"net"
	"net/url"
)

// IsLoopback reports whether addr (host:port) names this machine only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckIssuerURL refuses an OIDC issuer whose keys a network could
// replace: https, or plain http on loopback only.
func CheckIssuerURL(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("issuer %q must be an https URL such as https://accounts.example.com", issuer)
	}
	if u.Scheme != "https" && (u.Scheme != "http" || !IsLoopback(net.JoinHostPort(u.Hostname(), "0"))) {
		return fmt.Errorf("issuer %q must be https (http only on loopback)", issuer)
	}
	return nil
}
