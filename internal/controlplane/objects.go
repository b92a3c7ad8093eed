package controlplane

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/failpoint"
	"github.com/cast-dev/cast/internal/objstore"
)

// useObjects opens the object store history beyond etcd goes to, when one
// is configured, and hands it to the store. The S3 credentials are never
// logged: only where the history goes.
func (s *Server) useObjects(ctx context.Context) error {
	c := s.cfg.Objects
	if c.Folder == "" && c.S3.Endpoint == "" {
		s.lg.Info("no object store configured: all history stays in etcd")
		return nil
	}
	objs, err := objstore.Open(ctx, c)
	if err != nil {
		return err
	}
	if err := s.store.UseObjects(objs, s.cfg.Tier, failpoint.FromEnv(s.lg)); err != nil {
		return fmt.Errorf("object store: %w", err)
	}
	if c.S3.Endpoint != "" {
		s.lg.Info("history beyond etcd goes to S3", zap.String("endpoint", c.S3.Endpoint), zap.String("bucket", c.S3.Bucket), zap.String("prefix", c.S3.Prefix))
	} else {
		s.lg.Info("history beyond etcd goes to a folder", zap.String("dir", c.Folder))
	}
	return nil
}
