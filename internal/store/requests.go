package store

import (
	"context"
	"strings"

	"github.com/cast-dev/cast/internal/errs"
)

// Request ids (idempotency keys) belong to the principal that sent them:
// reqids/{principal}/{request id} names what a create made (a session or a
// migration), so one principal's retry gets its own result back and
// another principal's reuse of the id makes a new one. A request id holds
// no '/' (validate.ClientID), so the last part is always the id.
//
// Keys written before (requests/{request id}, no principal) are never read:
// nothing says whose they were, and answering from them could hand one
// principal another's session. A create retried across the upgrade may
// make a second session or migration; the old keys stay as they are.

// checkRequestKey refuses a request id passed without its principal.
func checkRequestKey(k string) error {
	if i := strings.LastIndexByte(k, '/'); k != "" && (i <= 0 || i == len(k)-1) {
		return errs.Internal(nil, "request id "+k+" is not scoped to a principal (store.RequestKey)")
	}
	return nil
}

// RequestedSession is the session a create with request key rk made
// (fence.RequestKey); ok is false when no create used that key.
func (s *Store) RequestedSession(ctx context.Context, rk string) (string, bool, error) {
	if err := checkRequestKey(rk); err != nil || rk == "" {
		return "", false, err
	}
	resp, err := s.cli.Get(ctx, s.requestKey(rk))
	if err != nil || len(resp.Kvs) == 0 {
		return "", false, err
	}
	return string(resp.Kvs[0].Value), true, nil
}
