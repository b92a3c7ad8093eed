package client

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/cast-dev/cast/internal/pki"
)

// TrustProblem explains a call that could not reach c.Addr when the cause
// is TLS trust: the address speaks TLS but c trusts no CA (gRPC then only
// sees a connection closed before the server's preface), or c trusts a
// CA that did not sign what the address presents. It names the CA
// presented and the one expected, and how to get the right one. "" when
// trust is not the cause (nothing listens, or it speaks plaintext), so
// the caller says the address is unreachable.
func (c Context) TrustProblem(ctx context.Context) string {
	addr, _, _ := strings.Cut(c.Addr, ",") // every replica serves the same CA
	chain, err := pki.PeekChain(ctx, addr)
	if err != nil || len(chain) == 0 {
		return ""
	}
	presented, pin := describeIssuer(chain)
	get := fmt.Sprintf("`cast --addr %s ca --ca-pin %s > ca.pem` fetches it once that pin matches the ca_pin the control plane logs, and the context's `ca:` (or CAST_CACERT) names that file", addr, pin)
	if c.CA == "" && c.CAPin == "" {
		return fmt.Sprintf("the control plane at %s speaks TLS, but no CA is trusted for it (no `ca:` or `ca-pin:` in the context, no CAST_CACERT or CAST_CA_PIN); it presented a certificate from %s: %s",
			addr, presented, get)
	}
	expected, trusted := c.expectedCA(chain)
	if trusted {
		return ""
	}
	return fmt.Sprintf("the control plane at %s presented a certificate from %s, but %s; if its CA was rotated, `cast ca bundle` (as an admin, trusting the old CA) prints the CAs to trust, else %s",
		addr, presented, expected, get)
}

// expectedCA says what c trusts and whether it trusts chain.
func (c Context) expectedCA(chain []*x509.Certificate) (string, bool) {
	if c.CAPin != "" {
		for _, ca := range chain[1:] {
			if pki.Pin(ca) == c.CAPin && pki.VerifyServer(chain, []*x509.Certificate{ca}) == nil {
				return "", true
			}
		}
		return fmt.Sprintf("the context expects the CA pinned %s (ca-pin, or CAST_CA_PIN)", c.CAPin), false
	}
	b, err := os.ReadFile(c.CA)
	if err != nil {
		return fmt.Sprintf("the CA file %s (the context's `ca:`, or CAST_CACERT) cannot be read: %v", c.CA, err), false
	}
	cas, err := pki.ParseBundle(b)
	if err != nil {
		return fmt.Sprintf("the CA file %s (the context's `ca:`, or CAST_CACERT) is not a CA: %v", c.CA, err), false
	}
	if pki.VerifyServer(chain, cas) == nil {
		return "", true
	}
	names := make([]string, len(cas))
	for i, ca := range cas {
		names[i] = fmt.Sprintf("%q (pin %s)", ca.Subject.CommonName, pki.Pin(ca))
	}
	return fmt.Sprintf("the CA file %s (the context's `ca:`, or CAST_CACERT) trusts only %s", c.CA, strings.Join(names, ", ")), false
}

// describeIssuer names the CA that signed chain's leaf and its pin, when
// the chain carries it (the control plane's does; else "PIN").
func describeIssuer(chain []*x509.Certificate) (string, string) {
	if ca := pki.IssuerOf(chain[0], chain[1:]); ca != nil {
		return fmt.Sprintf("CA %q (pin %s)", ca.Subject.CommonName, pki.Pin(ca)), pki.Pin(ca)
	}
	return fmt.Sprintf("CA %q (not in the chain it sent)", chain[0].Issuer.CommonName), "PIN"
}
