package store

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/quota"
)

// Pending account choices (the ask policy): accountchoices/{agent} holds
// the quota.Choice a person answers.

// maxChoiceSessions bounds the sessions one choice lists (a notice goes to
// each; the rest stay parked and run when the fleet's account changes).
const maxChoiceSessions = 1000

func (s *Store) choiceKey(agent string) string { return s.key("accountchoices", agent) }

// AddChoice records that sessionID parked on from's limit (until) under
// the ask policy. A choice pending for another account is replaced (the
// fleet moved on since); added is false when the session was listed.
func (s *Store) AddChoice(ctx context.Context, agent, from string, until time.Time, sessionID string, now time.Time) (quota.Choice, bool, error) {
	for range 10 {
		c, err := s.Choice(ctx, agent)
		if err != nil {
			return c, false, err
		}
		if c.From != from {
			// Notices a resolved choice still owes carry over.
			c = quota.Choice{From: from, Since: now, Rev: c.Rev, Owed: c.Owed}
		}
		if slices.Contains(c.Sessions, sessionID) {
			return c, false, nil
		}
		if len(c.Sessions) < maxChoiceSessions {
			c.Sessions = append(c.Sessions, sessionID)
		}
		c.Until = until
		val, err := json.Marshal(c)
		if err != nil {
			return c, false, errs.Internal(err, "encode account choice")
		}
		k := s.choiceKey(agent)
		tx, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", c.Rev)).Then(clientv3.OpPut(k, string(val))).Commit()
		if err != nil {
			return c, false, err
		}
		if tx.Succeeded {
			c.Rev = tx.Header.Revision
			return c, true, nil
		}
	}
	return quota.Choice{}, false, errs.New(errs.KindAborted, errs.ReasonConflict, "the %s account choice kept changing; retry", agent)
}

// Choice reads agent's pending choice (From "" when none).
func (s *Store) Choice(ctx context.Context, agent string) (quota.Choice, error) {
	c, rev, _, err := getJSON[quota.Choice](ctx, s.cli, s.choiceKey(agent), "account choice")
	c.Rev = rev
	return c, err
}

// ResolveChoice replaces c, if it is still the record, by the notices it
// owes (none: removes it); false means it changed (another answer, or
// another session added) and the caller re-reads.
func (s *Store) ResolveChoice(ctx context.Context, agent string, c quota.Choice, owed []quota.SwitchNotice) (bool, error) {
	k := s.choiceKey(agent)
	op := clientv3.OpDelete(k)
	if len(owed) > 0 {
		val, err := json.Marshal(quota.Choice{Owed: owed})
		if err != nil {
			return false, errs.Internal(err, "encode account choice")
		}
		op = clientv3.OpPut(k, string(val))
	}
	tx, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", c.Rev)).Then(op).Commit()
	if err != nil {
		return false, err
	}
	return tx.Succeeded, nil
}
