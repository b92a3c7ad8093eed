package controlplane

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/authz"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/migrate"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/validate"
)

// migrationService is the thin gRPC face of migrate.Manager.
type migrationService struct {
	castv1.UnimplementedMigrationServiceServer
	s *Server
}

// maxMigrationSessions bounds the ids one StartMigration names.
const maxMigrationSessions = 10000

func (h *migrationService) StartMigration(ctx context.Context, req *castv1.StartMigrationRequest) (*castv1.Migration, error) {
	if err := refuse(
		validate.Check(validate.Name, "to", req.To),
		validate.Check(validate.Name, "label", req.Label),
		validate.Check(validate.Name, "from_node", req.FromNode),
		validate.Each(validate.SessionID, "session_ids", req.SessionIds, maxMigrationSessions),
		validate.Check(validate.ClientID, "request_id", req.RequestId),
		validate.Range("max_parallel", int64(req.MaxParallel), 0, int64(h.s.cfg.Migrate.MaxParallel)),
	); err != nil {
		return nil, err
	}
	r := migrate.StartRequest{
		To: req.To, Label: req.Label, SessionIDs: req.SessionIds, FromNode: req.FromNode, All: req.All,
		MaxParallel: int(req.MaxParallel), RequestID: req.RequestId, RequestBy: caller(ctx), SkipWorkTree: req.SkipWorktree, CleanSource: req.CleanSource,
	}
	if req.Wait != nil {
		if err := req.Wait.CheckValid(); err != nil || req.Wait.AsDuration() < 0 {
			return nil, invalid("wait must be a duration of zero or more (e.g. 10m)")
		}
		r.Wait = req.Wait.AsDuration()
	}
	return h.answer(h.s.migrations.Start(ctx, r))
}

// answer is a handler's reply with the migration the manager gave:
// redacted, or the manager's error as a status.
func (h *migrationService) answer(m *castv1.Migration, err error) (*castv1.Migration, error) {
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return redact(m), nil
}

func validMigrationID(id string) error {
	return refuse(validate.Need(validate.ClientID, "migration id", id))
}

func (h *migrationService) GetMigration(ctx context.Context, req *castv1.GetMigrationRequest) (*castv1.Migration, error) {
	if err := validMigrationID(req.Id); err != nil {
		return nil, err
	}
	return h.answer(h.s.migrations.Get(ctx, req.Id))
}

func (h *migrationService) ListMigrations(ctx context.Context, req *castv1.ListMigrationsRequest) (*castv1.ListMigrationsResponse, error) {
	size, err := listArgs(req.PageSize, req.PageToken, defaultPageSize)
	if err != nil {
		return nil, err
	}
	f, err := parseFilter(req.Filter, migrationFields...)
	if err != nil {
		return nil, err
	}
	// The store fills the page from the migrations after the token, a
	// page's worth per read (as ListSessions); a user's page holds only
	// its own migrations, a filtered page only the matching ones.
	p, _ := authz.FromContext(ctx)
	list, next, err := h.s.store.QueryMigrations(ctx, store.MigrationQuery{Size: size, Token: req.PageToken,
		Scope: "migrations:" + scope(req.Filter, p.String()),
		Keep: func(m *castv1.Migration) bool {
			return f.Match(func(field string) []string { return migrationField(m, field) }) && h.s.ownsMigration(ctx, p, m)
		}})
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	out := make([]*castv1.Migration, 0, len(list))
	for _, m := range list {
		out = append(out, redact(m))
	}
	return &castv1.ListMigrationsResponse{Migrations: out, NextPageToken: next}, nil
}

// redact drops the owner fencing tokens a migration records: they let
// whoever holds them write as the owner, so they never leave the control
// plane.
func redact(m *castv1.Migration) *castv1.Migration {
	m = proto.Clone(m).(*castv1.Migration)
	for _, ms := range m.Sessions {
		ms.SourceToken = 0
	}
	return m
}

func (h *migrationService) CancelMigration(ctx context.Context, req *castv1.CancelMigrationRequest) (*castv1.Migration, error) {
	if err := validMigrationID(req.Id); err != nil {
		return nil, err
	}
	return h.answer(h.s.migrations.Cancel(ctx, req.Id))
}
