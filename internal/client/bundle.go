package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/cast-dev/cast/internal/fsutil"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/pki"
)

// A CA rotation reaches clients through the trust bundle: every reply
// names the control plane's bundle in a header, and a client whose copy
// differs fetches the bundle (GetCABundle) over the connection it just
// verified against its copy, then keeps it. It never trusts anything it
// fetched over a connection it had not verified.

// CABundleHeader is the reply header naming the control plane's trust
// bundle (pki.BundleHash; the control plane sets it).
const CABundleHeader = "cast-ca-bundle"

// BundleSync keeps a client's copy of the trust bundle current.
type BundleSync struct {
	// Have is the hash of the bundle the client trusts now.
	Have func() string
	// Keep stores a new bundle (already checked to be CA certificates).
	Keep func(bundlePEM []byte) error
	// Warn reports a failed update (the call itself succeeded).
	Warn func(err error)

	mu sync.Mutex
	c  *Client
}

// seen is called with the bundle hash a reply named.
func (b *BundleSync) seen(ctx context.Context, hash string) {
	if hash == "" || b.c == nil || hash == b.Have() || !b.mu.TryLock() {
		return // up to date, or an update is under way (its own call)
	}
	defer b.mu.Unlock()
	if hash == b.Have() {
		return
	}
	if err := b.c.FetchBundle(ctx, b); err != nil && b.Warn != nil {
		b.Warn(err)
	}
}

// Sync fetches the bundle now (after a join, say) and keeps it if new.
func (b *BundleSync) Sync(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.c.FetchBundle(ctx, b)
}

// FetchBundle gets the control plane's bundle over c's verified
// connection and has b keep it when it differs from the one held.
func (c *Client) FetchBundle(ctx context.Context, b *BundleSync) error {
	resp, err := c.Auth.GetCABundle(ctx, &castv1.GetCABundleRequest{})
	if err != nil {
		return fmt.Errorf("fetch the control plane's CA bundle: %w", err)
	}
	cas, err := pki.ParseBundle(resp.Bundle)
	if err != nil {
		return err
	}
	if pki.BundleHash(cas) == b.Have() {
		return nil
	}
	return b.Keep(resp.Bundle)
}

// interceptor reads the bundle header of every unary reply.
func (b *BundleSync) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var md metadata.MD
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&md))...)
	if err == nil {
		if v := md.Get(CABundleHeader); len(v) == 1 {
			b.seen(ctx, v[0])
		}
	}
	return err
}

// bundleMarker starts a bundle file cast wrote (PEM readers skip text
// before a block), so a later rotation step may rewrite it.
const bundleMarker = "# cast: the control plane's trust bundle, rewritten by cast through CA rotations\n"

// SaveBundle checks bundlePEM holds CA certificates and writes it to path
// atomically, keeping the file's mode (perm for a new file).
func SaveBundle(path string, bundlePEM []byte, perm os.FileMode) error {
	if _, err := pki.ParseBundle(bundlePEM); err != nil {
		return err
	}
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fsutil.WriteFileAtomic(path, append([]byte(bundleMarker), bundlePEM...), perm)
}

// castsFile reports whether a CA file holding cur is cast's to replace by
// next: cast wrote it, or each of its CAs is one of next's (`cast ca >
// file`, or a bundle a step ago). Any other is the user's own PKI (the
// company's root an operator CA chains to, a system store also holding
// cast's CA), which cast never rewrites. A file that holds no CA is
// garbled and rewritten.
func castsFile(cur, next []byte) bool {
	if bytes.HasPrefix(cur, []byte(bundleMarker)) {
		return true
	}
	have, err := pki.ParseBundle(cur)
	if err != nil {
		return true
	}
	want, err := pki.ParseBundle(next)
	if err != nil {
		return false
	}
	for _, c := range have {
		if !slices.ContainsFunc(want, c.Equal) {
			return false
		}
	}
	return true
}

// fileTrust trusts the CAs in the file at path, read again at each
// handshake: a process that outlives a CA rotation (an agent's `cast
// mcp`, whose node rewrites its bundle file; a command that just updated
// its context's file) reconnects trusting the file as it is now. A file
// that no longer parses keeps the last good bundle.
func fileTrust(path string) (*tls.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	t, err := pki.NewTrust("", b)
	if err != nil {
		return nil, fmt.Errorf("CA file %s: %w", path, err)
	}
	cfg := t.Config()
	verify := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if b, err := os.ReadFile(path); err == nil {
			_ = t.SetBundle(b)
		}
		return verify(cs)
	}
	return cfg, nil
}

// FileBundleSync keeps the bundle in the CA file at path (a context's
// "ca"), so the next command trusts what this one learnt, when the file
// is cast's (castsFile); another is left as it is.
func FileBundleSync(path string, warn func(error)) *BundleSync {
	var left atomic.Pointer[string] // the hash of a bundle not written: this call fetches it no more
	return &BundleSync{
		Have: func() string {
			if h := left.Load(); h != nil {
				return *h
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return ""
			}
			return pki.BundleHashPEM(b)
		},
		Keep: func(b []byte) error {
			if cur, err := os.ReadFile(path); err == nil && !castsFile(cur, b) {
				h := pki.BundleHashPEM(b)
				left.Store(&h)
				return nil
			}
			return SaveBundle(path, b, 0o644)
		},
		Warn: warn,
	}
}
