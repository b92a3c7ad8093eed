package store

import (
	"context"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// SetAfterChunks runs fn in every append after its chunks are written and
// before it is committed, so a test can change the world in between.
func SetAfterChunks(s *Store, fn func()) { s.afterChunks = fn }

// DecodeMessage decodes an envelope read at rev, as the watches do.
func DecodeMessage(ctx context.Context, s *Store, sessionID string, val []byte, rev int64) (*castv1.Message, error) {
	return s.decodeMessage(ctx, sessionID, val, rev)
}
