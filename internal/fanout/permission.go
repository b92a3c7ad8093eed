package fanout

import (
	"context"
	"errors"

	"github.com/cast-dev/cast/internal/store"
)

// WaitPermission blocks until the session's permission request rid is
// answered (and returns the answer) or ctx ends. It is not counted
// against a principal's watches: the call that waits is a unary one,
// bounded in time by its caller.
func (h *Hub) WaitPermission(ctx context.Context, sessionID, rid string) (store.Permission, error) {
	s, err := h.join("", sessionID, true)
	if err != nil {
		return store.Permission{}, err
	}
	defer h.leave("", s)
	for {
		if err := h.rejoin(s); err != nil {
			return store.Permission{}, err
		}
		p, err := h.src.GetPermission(ctx, sessionID, rid)
		if err != nil || p.Answered {
			return p, err
		}
		p, err = waitAnswer(ctx, s, rid)
		if !errors.Is(err, ErrFellBehind) {
			return p, err
		}
	}
}

// waitAnswer waits on s's live events for rid's answer.
func waitAnswer(ctx context.Context, s *sub, rid string) (store.Permission, error) {
	for {
		it, err := s.next(ctx)
		if err != nil {
			return store.Permission{}, err
		}
		if p := it.perm; p != nil && p.RequestID == rid && p.Answered {
			return *p, nil
		}
	}
}
