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
)

// Fleet accounts: accounts/{agent}/{name} holds an AccountRecord (the
// credential sealed by the caller, never plaintext), activeaccounts/{agent}
// the ActiveAccount every node's shared credential store must hold. An
// activation compares the active key's ModRevision, so when several parked
// sessions report the same limit at once only one switch happens.

// AccountRecord is a fleet account as stored.
type AccountRecord struct {
	Name         string    `json:"name"`
	Agent        string    `json:"agent"`
	Sealed       []byte    `json:"sealed"` // secrets.Box output, bound to agent/name
	LimitedUntil time.Time `json:"limited_until,omitzero"`
	// LastLimited orders the accounts with headroom: the one limited
	// longest ago (or never) goes first.
	LastLimited time.Time `json:"last_limited,omitzero"`
	Switches    int64     `json:"switches,omitempty"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Usage is the provider's usage windows as the last turn on this
	// account reported them (UsageAt).
	Usage   []UsageWindow `json:"usage,omitempty"`
	UsageAt time.Time     `json:"usage_at,omitzero"`
	Rev     int64         `json:"-"` // ModRevision, for compare-and-swap
}

// UsageWindow is one provider usage window of an account.
type UsageWindow struct {
	Name          string    `json:"name"`
	UsedPercent   float64   `json:"used_percent"`
	WindowMinutes int       `json:"window_minutes,omitempty"`
	ResetsAt      time.Time `json:"resets_at,omitzero"`
}

// ActiveAccount is the account an agent's shared credential store holds.
// Epoch grows with every activation (a re-activation at a window reset
// included), so nodes can ignore an older instruction.
type ActiveAccount struct {
	Name  string `json:"name"`
	Epoch int64  `json:"epoch"`
	Rev   int64  `json:"-"`
}

func (s *Store) accountKey(agent, name string) string { return s.key("accounts", agent, name) }
func (s *Store) activeAccountKey(agent string) string { return s.key("activeaccounts", agent) }

// PutAccount stores r (a replacement keeps the limit bookkeeping).
func (s *Store) PutAccount(ctx context.Context, r AccountRecord) (*AccountRecord, error) {
	defer s.observe("put_account", time.Now())
	for range 10 {
		old, err := s.GetAccount(ctx, r.Agent, r.Name)
		var nf *errs.Error
		switch {
		case err == nil:
			r.LimitedUntil, r.LastLimited, r.Switches, r.Usage, r.UsageAt = old.LimitedUntil, old.LastLimited, old.Switches, old.Usage, old.UsageAt
		case errors.As(err, &nf) && nf.Kind == errs.KindNotFound:
			old = &AccountRecord{}
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
func (s *Store) casAccount(ctx context.Context, r AccountRecord, rev int64) (bool, int64, error) {
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
func (s *Store) GetAccount(ctx context.Context, agent, name string) (*AccountRecord, error) {
	resp, err := s.cli.Get(ctx, s.accountKey(agent, name))
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, errs.NotFound("no %s account named %q; add it with `cast account add %s --agent %s --credentials FILE`", agent, name, name, agent).With("account", name)
	}
	r := &AccountRecord{}
	if err := json.Unmarshal(resp.Kvs[0].Value, r); err != nil {
		return nil, errs.Internal(err, "decode account")
	}
	r.Rev = resp.Kvs[0].ModRevision
	return r, nil
}

// ListAccounts lists accounts (one agent's, or all with agent ""), by
// agent then name.
func (s *Store) ListAccounts(ctx context.Context, agent string) ([]*AccountRecord, error) {
	prefix := s.key("accounts") + "/"
	if agent != "" {
		prefix += agent + "/"
	}
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make([]*AccountRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		r := &AccountRecord{}
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
func (s *Store) ActiveAccount(ctx context.Context, agent string) (ActiveAccount, error) {
	resp, err := s.cli.Get(ctx, s.activeAccountKey(agent))
	if err != nil || len(resp.Kvs) == 0 {
		return ActiveAccount{}, err
	}
	var a ActiveAccount
	if err := json.Unmarshal(resp.Kvs[0].Value, &a); err != nil {
		return ActiveAccount{}, errs.Internal(err, "decode active account")
	}
	a.Rev = resp.Kvs[0].ModRevision
	return a, nil
}

// Activate makes name the agent's active account with the next epoch, if
// the active record is still at prev.Rev and the account still exists.
// ok=false means another activation won; the caller re-reads.
func (s *Store) Activate(ctx context.Context, agent, name string, prev ActiveAccount) (ActiveAccount, bool, error) {
	defer s.observe("activate_account", time.Now())
	next := ActiveAccount{Name: name, Epoch: prev.Epoch + 1}
	val, err := json.Marshal(next)
	if err != nil {
		return next, false, errs.Internal(err, "encode active account")
	}
	ak := s.activeAccountKey(agent)
	tx, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(ak), "=", prev.Rev),
		clientv3.Compare(clientv3.CreateRevision(s.accountKey(agent, name)), ">", 0),
	).Then(clientv3.OpPut(ak, string(val))).Commit()
	if err != nil || !tx.Succeeded {
		return next, false, err
	}
	next.Rev = tx.Header.Revision
	return next, true, nil
}

// UpdateAccount applies fn to an account in a compare-and-swap loop (limit
// bookkeeping; the sealed credential is kept).
func (s *Store) UpdateAccount(ctx context.Context, agent, name string, fn func(*AccountRecord)) (*AccountRecord, error) {
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
