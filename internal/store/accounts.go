package store

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/quota"
)

// Fleet accounts: accounts/{agent}/{name} holds a quota.Account (the
// credential sealed by the caller, never plaintext), activeaccounts/{agent}
// the quota.Active every node's shared credential store must hold. An
// activation compares the active key's ModRevision, so when several parked
// sessions report the same limit at once only one switch happens.

func (s *Store) accountKey(agent, name string) string { return s.key("accounts", agent, name) }
func (s *Store) activeAccountKey(agent string) string { return s.key("activeaccounts", agent) }

// PutAccount stores r (a replacement keeps the limit bookkeeping).
func (s *Store) PutAccount(ctx context.Context, r quota.Account) (*quota.Account, error) {
	defer s.observe("put_account", time.Now())
	for range 10 {
		old, err := s.GetAccount(ctx, r.Agent, r.Name)
		var nf *errs.Error
		switch {
		case err == nil:
			r.LimitedUntil, r.LimitHit, r.LastLimited, r.Switches, r.Usage, r.UsageAt = old.LimitedUntil, old.LimitHit, old.LastLimited, old.Switches, old.Usage, old.UsageAt
		case errors.As(err, &nf) && nf.Kind == errs.KindNotFound:
			old = &quota.Account{}
		default:
			return nil, err
		}
		r.UpdatedAt = time.Now().UTC()
		ok, rev, err := s.casAccount(ctx, r, old.Rev)
		if err != nil {
			return nil, err
		}
		if ok {
			r.Rev = rev
			return &r, nil
		}
	}
	return nil, errs.New(errs.KindAborted, errs.ReasonConflict, "account %s/%s kept changing; retry", r.Agent, r.Name)
}

// casAccount writes r if its key's ModRevision is still rev (0: absent).
func (s *Store) casAccount(ctx context.Context, r quota.Account, rev int64) (bool, int64, error) {
	val, err := json.Marshal(r)
	if err != nil {
		return false, 0, errs.Internal(err, "encode account")
	}
	k := s.accountKey(r.Agent, r.Name)
	tx, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", rev)).Then(clientv3.OpPut(k, string(val))).Commit()
	if err != nil {
		return false, 0, err
	}
	return tx.Succeeded, tx.Header.Revision, nil
}

// GetAccount reads one account.
func (s *Store) GetAccount(ctx context.Context, agent, name string) (*quota.Account, error) {
	r, rev, found, err := getJSON[quota.Account](ctx, s.cli, s.accountKey(agent, name), "account")
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errs.NotFound("no %s account named %q; add it with `cast account add %s --agent %s --credentials FILE`", agent, name, name, agent).With("account", name)
	}
	r.Rev = rev
	return &r, nil
}

// ListAccounts lists accounts (one agent's, or all with agent ""), by
// agent then name.
func (s *Store) ListAccounts(ctx context.Context, agent string) ([]*quota.Account, error) {
	prefix := s.agentPrefix("accounts", agent)
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make([]*quota.Account, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		r := &quota.Account{}
		if err := json.Unmarshal(kv.Value, r); err != nil {
			return nil, errs.Internal(err, "decode account")
		}
		r.Rev = kv.ModRevision
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Agent != out[j].Agent {
			return out[i].Agent < out[j].Agent
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// DeleteAccount removes an account unless it is the active one.
func (s *Store) DeleteAccount(ctx context.Context, agent, name string) error {
	act, err := s.ActiveAccount(ctx, agent)
	if err != nil {
		return err
	}
	if act.Name == name {
		return errs.New(errs.KindFailedPrecondition, errs.ReasonAccountActive,
			"%s account %q is the active one; make another active first (`cast account use OTHER --agent %s`)", agent, name, agent).With("account", name)
	}
	tx, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(s.activeAccountKey(agent)), "=", act.Rev)).
		Then(clientv3.OpDelete(s.accountKey(agent, name))).Commit()
	switch {
	case err != nil:
		return err
	case !tx.Succeeded:
		return errs.New(errs.KindAborted, errs.ReasonConflict, "the active %s account changed meanwhile; retry", agent)
	case tx.Responses[0].GetResponseDeleteRange().Deleted == 0:
		return errs.NotFound("no %s account named %q", agent, name).With("account", name)
	}
	return nil
}

// ActiveAccount reads the agent's active account (Name "" and Rev 0 when
// none was ever activated).
func (s *Store) ActiveAccount(ctx context.Context, agent string) (quota.Active, error) {
	a, rev, _, err := getJSON[quota.Active](ctx, s.cli, s.activeAccountKey(agent), "active account")
	a.Rev = rev
	return a, err
}

// Activate makes name the agent's active account with the next epoch, if
// the active record is still at prev.Rev and the account still exists;
// the record keeps owed, the notice the switch owes a session (zero:
// none), and so do the notices the fleet owes (the choice's Owed), in the
// same txn: the next activation replaces the record, and the notice must
// outlive it until it is written. ok=false means another activation won
// (or the choice changed meanwhile); the caller re-reads.
func (s *Store) Activate(ctx context.Context, agent, name string, prev quota.Active, owed quota.SwitchNotice) (quota.Active, bool, error) {
	defer s.observe("activate_account", time.Now())
	next := quota.Active{Name: name, Epoch: prev.Epoch + 1, SwitchNotice: owed}
	val, err := json.Marshal(next)
	if err != nil {
		return next, false, errs.Internal(err, "encode active account")
	}
	ak := s.activeAccountKey(agent)
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(ak), "=", prev.Rev),
		clientv3.Compare(clientv3.CreateRevision(s.accountKey(agent, name)), ">", 0),
	}
	ops := []clientv3.Op{clientv3.OpPut(ak, string(val))}
	if owed.ClientID != "" {
		c, err := s.Choice(ctx, agent)
		if err != nil {
			return next, false, err
		}
		c.Owed = append(c.Owed, owed)
		cval, err := json.Marshal(c)
		if err != nil {
			return next, false, errs.Internal(err, "encode account choice")
		}
		ck := s.choiceKey(agent)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(ck), "=", c.Rev))
		ops = append(ops, clientv3.OpPut(ck, string(cval)))
	}
	tx, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil || !tx.Succeeded {
		return next, false, err
	}
	next.Rev = tx.Header.Revision
	return next, true, nil
}

// UpdateAccount applies fn to an account in a compare-and-swap loop (limit
// bookkeeping; the sealed credential is kept).
func (s *Store) UpdateAccount(ctx context.Context, agent, name string, fn func(*quota.Account)) (*quota.Account, error) {
	for range 10 {
		r, err := s.GetAccount(ctx, agent, name)
		if err != nil {
			return nil, err
		}
		fn(r)
		ok, rev, err := s.casAccount(ctx, *r, r.Rev)
		if err != nil {
			return nil, err
		}
		if ok {
			r.Rev = rev
			return r, nil
		}
		s.m.TxnConflicts.WithLabelValues("update_account").Inc()
	}
	return nil, errs.New(errs.KindAborted, errs.ReasonConflict, "account %s/%s kept changing; retry", agent, name)
}

// credGrantTTL bounds how long a SetCredential's grant can be used.
const credGrantTTL = 60

func (s *Store) credGrantKey(node, hash string) string { return s.key("credgrants", node, hash) }

// PutCredentialGrant records a one-time grant (by its hash) for node to
// fetch agent's account; it lapses after a minute.
func (s *Store) PutCredentialGrant(ctx context.Context, node, hash, agent, account string) error {
	l, err := s.cli.Grant(ctx, credGrantTTL)
	if err != nil {
		return err
	}
	_, err = s.cli.Put(ctx, s.credGrantKey(node, hash), agent+"/"+account, clientv3.WithLease(l.ID))
	return err
}

// TakeCredentialGrant consumes a grant: it returns what it was for, and
// ok=false if it does not exist (never issued, used or lapsed).
func (s *Store) TakeCredentialGrant(ctx context.Context, node, hash string) (agent, account string, ok bool, err error) {
	k := s.credGrantKey(node, hash)
	tx, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), ">", 0)).
		Then(clientv3.OpGet(k), clientv3.OpDelete(k)).Commit()
	if err != nil || !tx.Succeeded {
		return "", "", false, err
	}
	kvs := tx.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return "", "", false, nil
	}
	agent, account, _ = strings.Cut(string(kvs[0].Value), "/")
	return agent, account, true, nil
}
