package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/tick"
)

// What a node trusts in the control plane: the CA of --ca-pin for its
// first contact, then the trust bundle it learnt over a verified
// connection (at its join, at each renewal, and whenever a reply names
// another bundle), kept in DataDir/ca-bundle.pem (0600, replaced
// atomically). Through a CA rotation the bundle holds the old and the new
// CA, so the node follows the server certificate from one to the other;
// once the old CA is retired the bundle drops it.

// maxBundleBytes bounds a bundle file.
const maxBundleBytes = 64 << 10

// BundlePath is the trust bundle of the node with data dir dataDir.
func BundlePath(dataDir string) string { return filepath.Join(dataDir, client.NodeBundleFile) }

// loadTrust trusts the stored bundle, except when the node joins anew
// (a join token and no live certificate): the bundle of an earlier
// membership may name CAs the control plane has since replaced, and the
// pin the operator gives with the join token is what counts then.
func loadTrust(cfg Config, id *client.Identity) (*pki.Trust, error) {
	b, err := os.ReadFile(BundlePath(cfg.DataDir))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b = nil
	case err != nil:
		return nil, err
	case len(b) > maxBundleBytes:
		return nil, fmt.Errorf("%s: larger than %d bytes", BundlePath(cfg.DataDir), maxBundleBytes)
	}
	if c := id.Cert(); cfg.JoinToken != "" && (c == nil || !time.Now().Before(c.Leaf.NotAfter)) {
		b = nil
	}
	t, err := pki.NewTrust(cfg.CAPin, b)
	if err != nil {
		return nil, fmt.Errorf("--ca-pin or %s: %w", BundlePath(cfg.DataDir), err)
	}
	return t, nil
}

// bundleSync follows the bundle replies name.
func (a *Daemon) bundleSync() *client.BundleSync {
	return &client.BundleSync{
		Have: a.trust.Hash,
		Keep: a.storeBundle,
		Warn: func(err error) { a.lg.Warn("tls CA bundle not updated", zap.Error(err)) },
	}
}

// syncBundle fetches the bundle over the verified connection now (after a
// join, so the pin stops being what the node trusts).
func (a *Daemon) syncBundle(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.bsync.Sync(cctx); err != nil && ctx.Err() == nil {
		a.lg.Warn("tls CA bundle not fetched; the next check or renewal brings it", zap.Error(err))
	}
}

// DefaultBundleInterval is how often a node asks for the trust bundle.
const DefaultBundleInterval = 5 * time.Minute

// followBundle fetches the bundle every BundleInterval until ctx ends:
// replies name it, but a node that makes no call (no turn, no fleet
// account) would keep trusting a retired CA until its next renewal.
func (a *Daemon) followBundle(ctx context.Context) {
	d := a.cfg.BundleInterval
	if d <= 0 {
		d = DefaultBundleInterval
	}
	tick.Every(ctx, d, func() bool {
		a.syncBundle(ctx)
		return true
	})
}

// keepBundle stores b if it is not the bundle held.
func (a *Daemon) keepBundle(b []byte) {
	if pki.BundleHashPEM(b) == a.trust.Hash() {
		return
	}
	if err := a.storeBundle(b); err != nil {
		a.lg.Warn("tls CA bundle not updated", zap.Error(err))
	}
}

// storeBundle writes b, then trusts it: a crash between the two leaves
// the file, which the next start trusts.
func (a *Daemon) storeBundle(b []byte) error {
	if err := client.SaveBundle(BundlePath(a.cfg.DataDir), b, 0o600); err != nil {
		return err
	}
	if err := a.trust.SetBundle(b); err != nil {
		return err
	}
	a.lg.Info("tls CA bundle updated", zap.String("bundle", a.trust.Hash()))
	return nil
}
