package node

import (
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/tick"
)

// With TLS a node proves who it is with a client certificate for its own
// key (mTLS), kept with the key in DataDir/identity.pem (0600, replaced
// atomically). It gets the first for its join token, or for the bearer
// credential `controlplane --dev` writes into its dev node's data dir, and renews
// it over its authenticated link at two thirds of its lifetime. After a
// renewal, later calls and the Connect stream move to new connections,
// which handshake with the new certificate; calls under way finish on the
// old ones.

// IdentityPath is where a node with data dir dataDir keeps its certificate
// and key.
func IdentityPath(dataDir string) string { return filepath.Join(dataDir, client.NodeIdentityFile) }

// errRotated ends a stream so the next one handshakes with a renewed
// certificate.
var errRotated = errors.New("client certificate renewed; moving the stream to a new connection")

// joinCert gets the node a certificate when it has no live one.
func (a *Daemon) joinCert(ctx context.Context) error {
	if c := a.id.Cert(); c != nil && time.Now().Before(c.Leaf.NotAfter) {
		a.cred.Set("") // the certificate is the credential
		return nil
	}
	var sign client.Signer
	switch {
	case a.cfg.JoinToken != "":
		sign = a.cli.JoinSigner(a.cfg.Name, a.cfg.JoinToken)
	case a.credSet():
		sign = a.issue // a bearer credential (dev mode's node) buys the first certificate
	default:
		return a.noCredential()
	}
	err := a.retryUnavailable(ctx, "join", func(cctx context.Context) error { return a.id.Renew(cctx, a.cfg.Name, sign) })
	if err != nil || ctx.Err() != nil {
		return err
	}
	a.cred.Set("")
	// The connection that joined had no certificate: later calls go on
	// one that presents it.
	if err := a.cli.Redial(10 * time.Second); err != nil {
		return err
	}
	a.syncBundle(ctx)
	a.lg.Info("joined the control plane with a client certificate", zap.Time("expires", a.id.Cert().Leaf.NotAfter))
	return nil
}

// issue has the control plane sign csr for the credential this node
// authenticates with.
func (a *Daemon) issue(ctx context.Context, csr []byte) ([]byte, error) {
	resp, err := a.cli.Auth.IssueCertificate(ctx, &castv1.IssueCertificateRequest{Csr: csr})
	if err == nil && len(resp.CaBundle) > 0 {
		// During a CA rotation a renewal is how the node learns the new
		// CA (the reply came over a connection it verified).
		a.keepBundle(resp.CaBundle)
	}
	return resp.GetCertificate(), err
}

// renewCerts renews the certificate at two thirds of its lifetime until
// ctx ends, retrying a failed renewal while the old one is valid.
func (a *Daemon) renewCerts(ctx context.Context) {
	// A certificate from an older control plane cannot serve metrics:
	// renew it at once, once (an older control plane gives the same kind).
	early := a.cfg.MetricsListen != "" && !pki.ServesNodeMetrics(a.id.Cert().Leaf)
	for {
		old := a.id.Cert().Leaf
		at := pki.RenewAt(old)
		if early {
			a.lg.Info("client certificate cannot serve metrics over TLS; renewing it now")
			at, early = time.Now(), false
		}
		if !tick.Sleep(ctx, time.Until(at)) {
			return
		}
		err := a.renewOnce(ctx)
		for err != nil && ctx.Err() == nil {
			left := time.Until(old.NotAfter)
			a.lg.Warn("client certificate renewal failed; retrying", zap.Error(err), zap.Duration("valid_for", left))
			if !tick.Sleep(ctx, max(left/8, 100*time.Millisecond)) {
				return
			}
			err = a.renewOnce(ctx)
		}
	}
}

func (a *Daemon) renewOnce(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	prev := a.id.Cert().Leaf
	a.renewing.Lock()
	err := a.id.Renew(cctx, a.cfg.Name, a.issue)
	a.renewing.Unlock()
	if err != nil {
		return err
	}
	// Calls under way keep the old connection until the old certificate
	// expires; later ones handshake with the new one.
	if err := a.cli.Redial(time.Until(prev.NotAfter)); err != nil {
		return err
	}
	select {
	case a.rotate <- struct{}{}:
	default:
	}
	a.lg.Info("client certificate renewed", zap.Time("expires", a.id.Cert().Leaf.NotAfter))
	return nil
}

// endWhenRotated calls end after a renewal, once the stream is idle (not
// handling a command), so the next stream handshakes with the new
// certificate before the old one expires.
func (a *Daemon) endWhenRotated(ctx context.Context, waiting *atomic.Int64, end func()) {
	select {
	case <-ctx.Done():
		return
	case <-a.rotate:
	}
	tick.Every(ctx, 20*time.Millisecond, func() bool {
		if waiting.Load() == 0 {
			return true
		}
		end()
		return false
	})
}

// renewedSince reports whether the node now holds a live certificate
// other than held, the one a refused stream presented. A renewal signed
// before held expired can land after the control plane ended the stream
// for held's expiry: the refusal waits for a renewal under way, and takes
// a newer certificate from the identity file (written there by another
// renewal), so the node reconnects with it rather than giving up.
func (a *Daemon) renewedSince(held *tls.Certificate) bool {
	if a.id == nil || held == nil {
		return false
	}
	// Holding it waits for a renewal under way, and keeps the next one
	// from storing its certificate between Reload's read and its store.
	a.renewing.Lock()
	defer a.renewing.Unlock()
	a.id.Reload()
	c := a.id.Cert()
	return c != held && time.Now().Before(c.Leaf.NotAfter)
}
