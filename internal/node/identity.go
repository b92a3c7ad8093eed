package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/secrets"
)

// A node proves who it is with its own credential, bound to its name by
// the control plane: it gets it once for a one-time join token (JoinNode)
// and keeps it in DataDir/credential (0600). Agents the node runs reach the
// API with it too (CAST_TOKEN_FILE), for `cast mcp` and `cast spawn`.

// CredentialFile is the credential's name in the data dir.
const CredentialFile = client.NodeCredentialFile

func credentialPath(dataDir string) string { return filepath.Join(dataDir, CredentialFile) }

// loadCredential reads the stored credential; an empty Token if none.
func loadCredential(dataDir string) (*client.Token, error) {
	tok, err := secrets.ReadToken(credentialPath(dataDir))
	if errors.Is(err, fs.ErrNotExist) {
		return client.NewToken(""), nil
	}
	if err != nil {
		return nil, fmt.Errorf("node credential: %w", err)
	}
	return client.NewToken(tok), nil
}

// join gets the node its identity when it has none: a client certificate
// with TLS (certs.go), else a bearer credential for the join token.
func (a *Daemon) join(ctx context.Context) error {
	if a.id != nil {
		return a.joinCert(ctx)
	}
	if a.credSet() {
		return nil
	}
	if a.cfg.JoinToken == "" {
		return a.noCredential()
	}
	return a.retryUnavailable(ctx, "join", func(cctx context.Context) error {
		resp, err := a.cli.Auth.JoinNode(cctx, &castv1.JoinNodeRequest{Name: a.cfg.Name, JoinToken: a.cfg.JoinToken})
		if err != nil {
			return err
		}
		if err := client.WriteNodeCredential(a.cfg.DataDir, resp.Credential); err != nil {
			return fmt.Errorf("store node credential: %w", err)
		}
		a.cred.Set(resp.Credential)
		a.lg.Info("joined the control plane")
		return nil
	})
}

func (a *Daemon) noCredential() error {
	return fmt.Errorf("node %s has no credential in %s: start it once with --join-token (an admin makes one with `cast node token create`)", a.cfg.Name, a.cfg.DataDir)
}

// retryUnavailable runs call until it succeeds, fails other than by the
// control plane being unreachable, or ctx ends (nil then).
func (a *Daemon) retryUnavailable(ctx context.Context, what string, call func(context.Context) error) error {
	err := retry.Do(ctx, retry.Reconnect(a.cfg.ReconnectMin, a.cfg.ReconnectMax), func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := call(cctx)
		if c := status.Code(err); err != nil && c != codes.Unavailable && c != codes.DeadlineExceeded {
			return retry.Stop(err)
		}
		return err
	}, func(err error, wait time.Duration) {
		a.lg.Info("control plane unreachable; retrying", zap.String("what", what), zap.Error(err), zap.Duration("in", wait))
	})
	if err == nil || ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("%s as node %s: %s", what, a.cfg.Name, status.Convert(err).Message())
}

func (a *Daemon) credSet() bool {
	md, _ := a.cred.GetRequestMetadata(context.Background())
	return len(md) > 0
}
