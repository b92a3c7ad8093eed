// Package archive retires sessions (`cast rm`): archived ones stay readable
// but hidden and closed to new messages; purged ones are deleted with every
// key stored under them. Neither happens to a session whose agent is
// running a turn or waiting on a permission prompt: it is refused
// (SESSION_RUNNING) until someone interrupts it (`cast interrupt`), so a
// turn's output is never cut off by a removal.
package archive

import (
	"context"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Store is what archiving needs of the store.
type Store interface {
	UpdateSession(ctx context.Context, id string, fn func(*castv1.Session) error) (*castv1.Session, error)
	PurgeSession(ctx context.Context, id string, check func(*castv1.Session) error) error
}

// Archive hides the session and closes it to new messages: the store
// refuses an open-only append (fence.Guard.Open) whose txn commits after
// the archive's, however early it read the session.
func Archive(ctx context.Context, st Store, id string) (*castv1.Session, error) {
	return st.UpdateSession(ctx, id, func(s *castv1.Session) error {
		if err := idle(s); err != nil {
			return err
		}
		s.Archived = true
		return nil
	})
}

// Purge deletes the session, its messages and every key under it.
func Purge(ctx context.Context, st Store, id string) error {
	return st.PurgeSession(ctx, id, idle)
}

// Sendable refuses a message to an archived session, up front: a caller
// that must not race an archive appends with fence.Guard.Open too.
func Sendable(s *castv1.Session) error {
	if s.Archived {
		return fence.Archived(s.Id)
	}
	return nil
}

// idle refuses a session whose agent is at work (or waits on a person).
func idle(s *castv1.Session) error {
	switch s.State {
	case castv1.SessionState_SESSION_STATE_RUNNING, castv1.SessionState_SESSION_STATE_WAITING_PERMISSION:
		return errs.New(errs.KindFailedPrecondition, errs.ReasonSessionBusy,
			"session %s is %s; stop it with `cast interrupt -s %s`, then remove it", s.Id, stateWord(s.State), s.Id).With("session", s.Id)
	}
	return nil
}

// Purgeable says whether a purge would take s now (as far as its record
// tells: the store also refuses a session fenced by a migration): the
// retention sweep's dry run.
func Purgeable(s *castv1.Session) error { return idle(s) }

func stateWord(st castv1.SessionState) string {
	if st == castv1.SessionState_SESSION_STATE_WAITING_PERMISSION {
		return "waiting on a permission prompt"
	}
	return "running a turn"
}

// PurgeIf deletes the session as Purge does, once cond (given the session
// as the purge's txn compares it, LastSeq filled in) accepts it too: the
// retention sweep's check that the session is still the idle one it read.
func PurgeIf(ctx context.Context, st Store, id string, cond func(*castv1.Session) error) error {
	return st.PurgeSession(ctx, id, func(s *castv1.Session) error {
		if err := idle(s); err != nil {
			return err
		}
		return cond(s)
	})
}
