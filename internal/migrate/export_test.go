package migrate

import (
	"context"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// SelectSessions is what a start moves (selectSessions), for tests.
func (mg *Manager) SelectSessions(ctx context.Context, r StartRequest, target string) ([]*castv1.MigrationSession, error) {
	return mg.selectSessions(ctx, r, target)
}
