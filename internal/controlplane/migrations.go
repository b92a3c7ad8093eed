package controlplane

import (
	"context"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/migrate"
)

// migrationService is the thin gRPC face of migrate.Manager.
type migrationService struct {
	castv1.UnimplementedMigrationServiceServer
	s *Server
}

func (h *migrationService) StartMigration(ctx context.Context, req *castv1.StartMigrationRequest) (*castv1.Migration, error) {
	r := migrate.StartRequest{
		To: req.To, Label: req.Label, SessionIDs: req.SessionIds, FromNode: req.FromNode, All: req.All,
		MaxParallel: int(req.MaxParallel), RequestID: req.RequestId, SkipWorkTree: req.SkipWorktree,
	}
	if req.Wait != nil {
		if err := req.Wait.CheckValid(); err != nil {
			return nil, invalid("wait: %v", err)
		}
		r.Wait = req.Wait.AsDuration()
	}
	m, err := h.s.migrations.Start(ctx, r)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return m, nil
}

func validMigrationID(id string) error {
	if !ids.ValidClientID(id) {
		return invalid("migration id %s is malformed; `cast migrate ls` lists migrations", quote(id))
	}
	return nil
}

func (h *migrationService) GetMigration(ctx context.Context, req *castv1.GetMigrationRequest) (*castv1.Migration, error) {
	if err := validMigrationID(req.Id); err != nil {
		return nil, err
	}
	m, err := h.s.migrations.Get(ctx, req.Id)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return m, nil
}

func (h *migrationService) ListMigrations(ctx context.Context, _ *castv1.ListMigrationsRequest) (*castv1.ListMigrationsResponse, error) {
	list, err := h.s.migrations.List(ctx)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.ListMigrationsResponse{Migrations: list}, nil
}

func (h *migrationService) CancelMigration(ctx context.Context, req *castv1.CancelMigrationRequest) (*castv1.Migration, error) {
	if err := validMigrationID(req.Id); err != nil {
		return nil, err
	}
	m, err := h.s.migrations.Cancel(ctx, req.Id)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return m, nil
}
