package fence

import (
	"context"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// SessionLister is the store's session listing, as EachSession uses it.
type SessionLister interface {
	ListSessions(ctx context.Context, pageSize int, token string, includeSub bool) ([]*castv1.Session, string, error)
	ListSessionsAfter(ctx context.Context, pageSize int, after string, includeSub bool) ([]*castv1.Session, string, error)
}

// EachSession calls fn with every session l lists, in id order, pageSize
// at a time, until fn fails. A listing that expired (the store compacted
// past its page token's revision: a listing of a big store outlived the
// retained history) goes on after the last session handed to fn, at the
// current revision: failing would fail every listing of a big store, and
// starting again from the first might never finish.
func EachSession(ctx context.Context, l SessionLister, pageSize int, includeSub bool, fn func(*castv1.Session) error) error {
	last := "" // the id of the last session handed to fn
	for token := ""; ; {
		page, next, err := l.ListSessions(ctx, pageSize, token, includeSub)
		if err != nil && token != "" && last != "" && errs.HasReason(err, errs.ReasonBadPageToken) {
			page, next, err = l.ListSessionsAfter(ctx, pageSize, last, includeSub)
		}
		if err != nil {
			return err
		}
		for _, sess := range page {
			last = sess.Id
			if err := fn(sess); err != nil {
				return err
			}
		}
		if token = next; token == "" {
			return nil
		}
	}
}
