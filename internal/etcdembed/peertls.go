package etcdembed

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/pki"
)

// peerCertTTL outlives any run: the files are made anew at every start.
const peerCertTTL = 10 * 365 * 24 * time.Hour

// peerTLS closes the peer port of a member of one, which has no peer to
// talk to but must listen: raft messages or a snapshot sent to it by
// another local process would be obeyed. It serves TLS and demands a
// client certificate from a CA made for this start, whose key is thrown
// away at once, so no client can ever present one. The member's own
// certificate and key are written to dir/peer-tls (0600, atomically).
func peerTLS(dir string) (transport.TLSInfo, error) {
	caPEM, caKey, err := pki.NewCA(peerCertTTL)
	if err != nil {
		return transport.TLSInfo{}, err
	}
	ca, err := pki.LoadCA(caPEM, caKey)
	if err != nil {
		return transport.TLSInfo{}, err
	}
	cert, err := ca.ServerCert([]string{"127.0.0.1", "::1", "localhost"}, peerCertTTL)
	if err != nil {
		return transport.TLSInfo{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return transport.TLSInfo{}, err
	}
	var chain []byte
	for _, der := range cert.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	d := filepath.Join(dir, "peer-tls")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return transport.TLSInfo{}, fmt.Errorf("etcdembed: peer TLS: %w", err)
	}
	info := transport.TLSInfo{CertFile: filepath.Join(d, "peer.pem"), KeyFile: filepath.Join(d, "peer-key.pem"),
		TrustedCAFile: filepath.Join(d, "peer-ca.pem"), ClientCertAuth: true}
	for path, data := range map[string][]byte{info.CertFile: chain, info.KeyFile: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		info.TrustedCAFile: caPEM} {
		if err := fsutil.WriteFileAtomic(path, data, 0o600); err != nil {
			return transport.TLSInfo{}, fmt.Errorf("etcdembed: peer TLS: %w", err)
		}
	}
	return info, nil
}
