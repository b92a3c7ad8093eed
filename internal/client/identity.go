package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/cast-dev/cast/internal/fsutil"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/secrets"
)

// Identity is a client certificate (mTLS) and its private key, kept in one
// file (the chain, then the key; mode 0600), so a renewal replaces both at
// once and a crash never leaves a key beside another key's certificate.
// The key never leaves this machine: the control plane sees only a CSR.
type Identity struct {
	path string
	cur  atomic.Pointer[tls.Certificate]
	// reload re-reads the file at each handshake: a `cast mcp` an agent
	// runs for hours picks up the certificate its node renewed.
	reload bool
}

// maxIdentityBytes bounds an identity file.
const maxIdentityBytes = 64 << 10

// LoadIdentity reads the identity at path; a missing file is an empty
// identity (HasCert false) that Renew can fill.
func LoadIdentity(path string) (*Identity, error) {
	id := &Identity{path: path}
	c, err := readIdentity(path)
	if errors.Is(err, fs.ErrNotExist) {
		return id, nil
	}
	if err != nil {
		return nil, err
	}
	id.cur.Store(c)
	return id, nil
}

func readIdentity(path string) (*tls.Certificate, error) {
	b, err := secrets.ReadPrivate(path, "client certificate", maxIdentityBytes)
	if err != nil {
		return nil, err
	}
	c, err := pki.ParseKeyPair(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// Path is the identity's file.
func (id *Identity) Path() string { return id.path }

// Cert is the current certificate, nil before the first.
func (id *Identity) Cert() *tls.Certificate { return id.cur.Load() }

// HasCert reports whether there is a certificate.
func (id *Identity) HasCert() bool { return id.cur.Load() != nil }

// GetClientCertificate is tls.Config.GetClientCertificate: the current
// certificate, or none (a join or a bearer token authenticates then).
func (id *Identity) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if id.reload {
		if c, err := readIdentity(id.path); err == nil {
			id.cur.Store(c)
		}
	}
	if c := id.cur.Load(); c != nil {
		return c, nil
	}
	return &tls.Certificate{}, nil
}

// Reload takes the certificate in the identity file when it outlives the
// current one (another process, or a renewal, replaced the file), and
// reports whether it did.
func (id *Identity) Reload() bool {
	c, err := readIdentity(id.path)
	if err != nil {
		return false
	}
	if cur := id.cur.Load(); cur != nil && !c.Leaf.NotAfter.After(cur.Leaf.NotAfter) {
		return false
	}
	id.cur.Store(c)
	return true
}

// Signer has the control plane sign a CSR and returns the certificate
// chain (PEM): JoinNode with a join token, or IssueCertificate over an
// authenticated connection.
type Signer func(ctx context.Context, csrPEM []byte) ([]byte, error)

// NodeIdentityFile is a node's certificate and key in its data dir.
const NodeIdentityFile = "identity.pem"

// NodeCredentialFile is a node's own credential (a bearer token) in its
// data dir, 0600: got once for a join token, or written by the control
// plane that starts the node (controlplane --dev).
const NodeCredentialFile = "credential"

// WriteNodeCredential stores a node credential in dataDir (0600,
// atomically), where the node reads it at start.
func WriteNodeCredential(dataDir, tok string) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(dataDir, NodeCredentialFile), []byte(tok+"\n"), 0o600)
}

// NodeBundleFile is the CAs a node trusts in the control plane, in its
// data dir (bundle.go): learnt at its join and kept through CA rotations.
const NodeBundleFile = "ca-bundle.pem"

// DefaultNodeDataDir is where a node keeps its state unless told (`node
// --data-dir`); `cast node join` writes the identity there too.
func DefaultNodeDataDir(getenv func(string) string) string {
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "cast", "node")
	}
	return filepath.Join(getenv("HOME"), ".local", "share", "cast", "node")
}

// JoinSigner signs through JoinNode: node name's first certificate, for
// a join token (`node --join-token`, `cast node join`).
func (c *Client) JoinSigner(name, joinToken string) Signer {
	return func(ctx context.Context, csr []byte) ([]byte, error) {
		resp, err := c.Auth.JoinNode(ctx, &castv1.JoinNodeRequest{Name: name, JoinToken: joinToken, Csr: csr})
		return resp.GetCertificate(), err
	}
}

// Renew makes a fresh key, has sign certify it, and stores both (0600,
// atomically) before using them.
func (id *Identity) Renew(ctx context.Context, name string, sign Signer) error {
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	csr, err := pki.CSR(key, name)
	if err != nil {
		return err
	}
	chain, err := sign(ctx, csr)
	if err != nil {
		return err
	}
	keyPEM, err := pki.KeyPEM(key)
	if err != nil {
		return err
	}
	bundle := append(append([]byte{}, chain...), keyPEM...)
	c, err := pki.ParseKeyPair(bundle)
	if err != nil {
		return fmt.Errorf("the control plane's certificate: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(id.path), 0o700); err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(id.path, bundle, 0o600); err != nil {
		return fmt.Errorf("store the client certificate: %w", err)
	}
	id.cur.Store(&c)
	return nil
}

// WithIdentity returns a copy of t presenting id's certificate at each
// handshake (the newest, after a renewal).
func WithIdentity(t *tls.Config, id *Identity) *tls.Config {
	t = t.Clone()
	t.GetClientCertificate = id.GetClientCertificate
	return t
}
