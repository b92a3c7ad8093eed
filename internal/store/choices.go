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
// the ask policy, and owes it question (the notice that asks) in the same
// write: a question whose append fails is written again under its client
// id. A choice pending for another account is replaced (the fleet moved
// on since); added is false when the session was listed.
func (s *Store) AddChoice(ctx context.Context, agent, from string, until time.Time, sessionID string, now time.Time, question quota.SwitchNotice) (quota.Choice, bool, error) {
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
		next := c
		if len(c.Sessions) < maxChoiceSessions {
			next.Sessions = append(slices.Clone(c.Sessions), sessionID)
		}
		next.Until = until
		next.Owed = append(slices.Clone(c.Owed), question)
		ok, rev, err := s.replaceChoice(ctx, agent, c.Rev, next)
		if err != nil {
			return c, false, err
		}
		if ok {
			next.Rev = rev
			return next, true, nil
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
	ok, _, err := s.replaceChoice(ctx, agent, c.Rev, quota.Choice{Owed: owed})
	return ok, err
}

// SetChoiceOwed replaces the notices c owes by owed (those still to
// write), keeping the rest of c, if it is still the record; false means it
// changed and the caller re-reads.
func (s *Store) SetChoiceOwed(ctx context.Context, agent string, c quota.Choice, owed []quota.SwitchNotice) (bool, error) {
	next := c
	next.Owed = owed
	ok, _, err := s.replaceChoice(ctx, agent, c.Rev, next)
	return ok, err
}

// replaceChoice writes next as agent's choice if the record is still at
// rev; a choice neither pending nor owing anything is removed.
func (s *Store) replaceChoice(ctx context.Context, agent string, rev int64, next quota.Choice) (bool, int64, error) {
	k := s.choiceKey(agent)
	op := clientv3.OpDelete(k)
	if next.From != "" || len(next.Owed) > 0 {
		val, err := json.Marshal(next)
		if err != nil {
			return false, 0, errs.Internal(err, "encode account choice")
		}
		op = clientv3.OpPut(k, string(val))
	}
	tx, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", rev)).Then(op).Commit()
	if err != nil || !tx.Succeeded {
		return false, 0, err
	}
	return true, tx.Header.Revision, nil
}
