package store

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	"github.com/cast-dev/cast/internal/secrets"
)

// The vault is token custody's record in etcd, used by the control plane:
// each fleet account's credential (sealed), its custodian and the refresh
// in flight. See package custody for why.
//
//	{prefix}custody/{agent}/{account}/cred        sealed credential + its order (issue time)
//	{prefix}custody/{agent}/{account}/custodian   {node, since} (JSON; a plain node name before), under that node's connection lease
//	{prefix}custody/{agent}/{account}/refreshing  the custodian's refresh in flight (no lease)
//
// The credential only moves forward: Put compares the stored revision and
// refuses a credential whose issue time is not later (custody.ErrNotNewer),
// so a snapshot written back, or a report racing a refresh, can never
// replace a newer refresh token with a spent one. The custodian key is
// attached to the node's connection lease, so a node that dies loses
// custody when its lease lapses and another connected node is elected. The
// refreshing record has no lease on purpose: a custodian that dies between
// the provider's rotation and Put holds the only live refresh token in its
// CLI's file, so no other node may refresh (that would present the spent
// one) until that node is back and has reported the file.

// CustodyFormats looks up an agent's credential format.
type CustodyFormats func(agent string) (custody.Format, error)

// Vault is the custody record over one etcd client.
type Vault struct {
	cli     *clientv3.Client
	box     *secrets.Box
	formats CustodyFormats
	prefix  string
	// OnHeld, when set, hears of each node made custodian (the audit log).
	OnHeld func(CustodyHolding)
}

// Vault returns the custody record kept beside this store's keys, under
// {prefix}custody/, sealing credentials with box.
func (s *Store) Vault(box *secrets.Box, formats CustodyFormats) *Vault {
	return &Vault{cli: s.cli, box: box, formats: formats, prefix: s.cfg.Prefix}
}

// custodyRecord is the stored credential. Only Sealed is secret.
type custodyRecord struct {
	Issued  int64  `json:"issued"`  // Unix ns; orders the family
	Expires int64  `json:"expires"` // Unix ns of the access token's expiry (0: unknown)
	By      string `json:"by"`      // node (or "add") that stored it
	Sealed  []byte `json:"sealed"`
}

// RefreshIntent is a refresh in flight.
type RefreshIntent struct {
	Node   string `json:"node"`
	Issued int64  `json:"issued"` // the credential being refreshed
}

func (v *Vault) key(agent, account, leaf string) string {
	return v.prefix + "custody/" + agent + "/" + account + "/" + leaf
}

func custodyAAD(agent, account string) []byte { return []byte("custody/" + agent + "/" + account) }

// maxCASTries bounds Put's retries under contention.
const maxCASTries = 16

// Add records an account's login (`cast account add`): stored when the
// account has none in custody or this one is newer.
func (v *Vault) Add(ctx context.Context, agent, account string, raw []byte) (custody.Token, error) {
	return v.put(ctx, agent, account, raw, "add", true)
}

// Put stores raw if it is newer (by issue time) than the stored credential;
// ErrNotNewer otherwise, and NOT_IN_CUSTODY when the account has no login
// in custody (removed): a node's report never brings one back. by names
// who stored it (never a secret).
func (v *Vault) Put(ctx context.Context, agent, account string, raw []byte, by string) (custody.Token, error) {
	return v.put(ctx, agent, account, raw, by, false)
}

func (v *Vault) put(ctx context.Context, agent, account string, raw []byte, by string, create bool) (custody.Token, error) {
	f, err := v.formats(agent)
	if err != nil {
		return custody.Token{}, errs.Invalid("%v", err)
	}
	tok, err := f.Parse(raw)
	if err != nil {
		return custody.Token{}, errs.Invalid("%v", err)
	}
	if tok.Issued.IsZero() {
		return custody.Token{}, errs.Invalid("the %s credential has no issue or expiry time; custody cannot order it", agent)
	}
	sealed, err := v.box.Seal(raw, custodyAAD(agent, account))
	if err != nil {
		return custody.Token{}, errs.Internal(err, "seal credential")
	}
	val, err := json.Marshal(custodyRecord{Issued: tok.Issued.UnixNano(), Expires: unixNano(tok.Expires), By: by, Sealed: sealed})
	if err != nil {
		return custody.Token{}, errs.Internal(err, "encode credential")
	}
	k := v.key(agent, account, "cred")
	for range maxCASTries {
		cur, rev, err := v.get(ctx, k)
		if err != nil {
			return custody.Token{}, err
		}
		if cur == nil && !create {
			return custody.Token{}, notInCustody(agent, account)
		}
		if cur != nil && cur.Issued >= tok.Issued.UnixNano() {
			return custody.Token{}, custody.ErrNotNewer
		}
		cmp := clientv3.Compare(clientv3.ModRevision(k), "=", rev)
		resp, err := v.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(k, string(val))).Commit()
		if err != nil {
			return custody.Token{}, errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "store credential: %v", err)
		}
		if resp.Succeeded {
			return tok, nil
		}
	}
	return custody.Token{}, errs.New(errs.KindAborted, errs.ReasonConflict, "credential of %s/%s changed %d times while storing; try again", agent, account, maxCASTries)
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// get reads the record at k and its mod revision (nil, 0 when absent).
func (v *Vault) get(ctx context.Context, k string) (*custodyRecord, int64, error) {
	return vaultGet[custodyRecord](ctx, v.cli, k, "credential")
}

// vaultGet is getJSON for custody's records (nil, 0 when absent): a read
// the store does not answer is unavailable, so a custodian tries again,
// and a record that does not decode is internal.
func vaultGet[T any](ctx context.Context, kv clientv3.KV, k, what string) (*T, int64, error) {
	r, rev, found, err := getJSON[T](ctx, kv, k, what+" record")
	if _, decode := errs.As(err); err != nil && !decode {
		return nil, 0, errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "read %s: %v", what, err)
	}
	if err != nil || !found {
		return nil, 0, err
	}
	return &r, rev, nil
}

// Get returns the whole credential (refresh token included): only for
// the account's custodian.
func (v *Vault) Get(ctx context.Context, agent, account string) ([]byte, custody.Token, error) {
	r, _, err := v.get(ctx, v.key(agent, account, "cred"))
	if err != nil {
		return nil, custody.Token{}, err
	}
	if r == nil {
		return nil, custody.Token{}, notInCustody(agent, account)
	}
	raw, err := v.box.Open(r.Sealed, custodyAAD(agent, account))
	if err != nil {
		return nil, custody.Token{}, errs.Internal(err, "open credential")
	}
	f, err := v.formats(agent)
	if err != nil {
		return nil, custody.Token{}, errs.Invalid("%v", err)
	}
	tok, err := f.Parse(raw)
	if err != nil {
		return nil, custody.Token{}, errs.Internal(err, "parse stored credential")
	}
	return raw, tok, nil
}

// AccessOnly returns the credential without its refresh token: what every
// node but the custodian gets.
func (v *Vault) AccessOnly(ctx context.Context, agent, account string) ([]byte, custody.Token, error) {
	raw, tok, err := v.Get(ctx, agent, account)
	if err != nil {
		return nil, custody.Token{}, err
	}
	f, _ := v.formats(agent)
	out, err := f.AccessOnly(raw)
	if err != nil {
		return nil, custody.Token{}, errs.Internal(err, "trim credential")
	}
	tok.HasRefresh = false
	return out, tok, nil
}

// CustodyHolding is one node's custody of one login, for the audit log: which
// node held which account's login from when (and, once it ended, until
// when).
type CustodyHolding struct {
	Agent, Account, Node string
	Since, Until         time.Time // Since is zero for a custodyRecord from before it was kept
}

// holder is the custodian record's value.
type custodyHolder struct {
	Node  string `json:"node"`
	Since int64  `json:"since"` // Unix ns of the election
}

// parseCustodyHolder reads a custodian record: JSON, or a bare node name as
// records were before they kept their start.
func parseCustodyHolder(v []byte) custodyHolder {
	var h custodyHolder
	if len(v) > 0 && v[0] == '{' && json.Unmarshal(v, &h) == nil {
		return h
	}
	return custodyHolder{Node: string(v)}
}

// Elect makes node the custodian of agent/account unless a live node
// already is, tying the record to lease (the node's connection lease), and
// returns the custodian. A node it makes custodian is passed to OnHeld.
func (v *Vault) Elect(ctx context.Context, agent, account, node string, lease fence.Lease) (string, error) {
	k := v.key(agent, account, "custodian")
	for range maxCASTries {
		now := time.Now()
		val, _ := json.Marshal(custodyHolder{Node: node, Since: now.UnixNano()})
		resp, err := v.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, string(val), clientv3.WithLease(clientv3.LeaseID(lease)))).
			Else(clientv3.OpGet(k)).Commit()
		if err != nil {
			return "", errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "elect custodian: %v", err)
		}
		if resp.Succeeded {
			if v.OnHeld != nil {
				v.OnHeld(CustodyHolding{Agent: agent, Account: account, Node: node, Since: now})
			}
			return node, nil
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			return parseCustodyHolder(kvs[0].Value).Node, nil
		}
		// The record lapsed between the compare and the read: again.
	}
	return "", errs.New(errs.KindAborted, errs.ReasonConflict, "custodian of %s/%s changed %d times while electing; try again", agent, account, maxCASTries)
}

// Custodian names the custodian ("" when none is live).
func (v *Vault) Custodian(ctx context.Context, agent, account string) (string, error) {
	who, _, err := v.custodian(ctx, agent, account)
	return who, err
}

// custodian names the custodian and its record's revision (0 when none).
func (v *Vault) custodian(ctx context.Context, agent, account string) (string, int64, error) {
	resp, err := v.cli.Get(ctx, v.key(agent, account, "custodian"))
	if err != nil {
		return "", 0, errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "read custodian: %v", err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0, nil
	}
	return parseCustodyHolder(resp.Kvs[0].Value).Node, resp.Kvs[0].ModRevision, nil
}

// Released reads a deleted custody key (store.FollowCustodyDeletes): the
// holding that ended, if key was a custodian record.
func (v *Vault) Released(key string, prev []byte, at time.Time) (CustodyHolding, bool) {
	rest, ok := strings.CutPrefix(key, v.prefix+"custody/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || parts[2] != "custodian" {
		return CustodyHolding{}, false
	}
	h := parseCustodyHolder(prev)
	out := CustodyHolding{Agent: parts[0], Account: parts[1], Node: h.Node, Until: at}
	if h.Since != 0 {
		out.Since = time.Unix(0, h.Since)
	}
	return out, true
}

// Resign ends node's custody of every login it holds (its mark was taken
// away), each only if node still holds it.
func (v *Vault) Resign(ctx context.Context, node string) error {
	resp, err := v.cli.Get(ctx, v.prefix+"custody/", clientv3.WithPrefix())
	if err != nil {
		return errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "read custodians: %v", err)
	}
	for _, kv := range resp.Kvs {
		if !strings.HasSuffix(string(kv.Key), "/custodian") || parseCustodyHolder(kv.Value).Node != node {
			continue
		}
		_, err := v.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).Commit()
		if err != nil {
			return errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "end custody: %v", err)
		}
	}
	return nil
}

// BeginRefresh records that node, the custodian, is about to refresh the
// credential issued at issued. It fails unless node is the live custodian
// and no other node's refresh is recorded.
func (v *Vault) BeginRefresh(ctx context.Context, agent, account, node string, issued time.Time) error {
	ck, ik := v.key(agent, account, "custodian"), v.key(agent, account, "refreshing")
	who, crev, err := v.custodian(ctx, agent, account)
	if err != nil {
		return err
	}
	if who != node {
		// As the Custody RPC refuses it (NOT_OWNER is a session's stale
		// owner token, and FAILED_PRECONDITION).
		return errs.New(errs.KindPermissionDenied, custody.ReasonNotCustodian, "node %s is not the custodian of %s/%s", node, agent, account)
	}
	cur, rev, err := v.intent(ctx, agent, account)
	if err != nil {
		return err
	}
	if cur != nil && cur.Node != node {
		return errs.New(errs.KindFailedPrecondition, errs.ReasonRefreshInDoubt, "node %s's refresh of %s/%s is unfinished; it must come back and report its credential first", cur.Node, agent, account)
	}
	val, _ := json.Marshal(RefreshIntent{Node: node, Issued: issued.UnixNano()})
	resp, err := v.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(ck), "=", crev),
		clientv3.Compare(clientv3.ModRevision(ik), "=", rev),
	).Then(clientv3.OpPut(ik, string(val))).Commit()
	if err != nil {
		return errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "custodyRecord refresh: %v", err)
	}
	if !resp.Succeeded {
		return errs.New(errs.KindAborted, errs.ReasonConflict, "the custodian or the refresh record of %s/%s changed meanwhile; try again", agent, account)
	}
	return nil
}

// EndRefresh clears node's refresh record (nothing when another's).
func (v *Vault) EndRefresh(ctx context.Context, agent, account, node string) error {
	ik := v.key(agent, account, "refreshing")
	cur, rev, err := v.intent(ctx, agent, account)
	if err != nil || cur == nil || cur.Node != node {
		return err
	}
	if _, err := v.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(ik), "=", rev)).Then(clientv3.OpDelete(ik)).Commit(); err != nil {
		return errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "clear refresh: %v", err)
	}
	return nil
}

// Intent returns the refresh in flight (nil when none).
func (v *Vault) Intent(ctx context.Context, agent, account string) (*RefreshIntent, error) {
	in, _, err := v.intent(ctx, agent, account)
	return in, err
}

func (v *Vault) intent(ctx context.Context, agent, account string) (*RefreshIntent, int64, error) {
	return vaultGet[RefreshIntent](ctx, v.cli, v.key(agent, account, "refreshing"), "refresh")
}

// Delete drops everything custody holds for agent/account (its login, its
// custodian and refresh records), for `cast account rm`.
func (v *Vault) Delete(ctx context.Context, agent, account string) error {
	if _, err := v.cli.Delete(ctx, v.key(agent, account, ""), clientv3.WithPrefix()); err != nil {
		return errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "delete custody custodyRecord: %v", err)
	}
	return nil
}

func notInCustody(agent, account string) error {
	return errs.New(errs.KindNotFound, custody.ReasonNotInCustody, "no login in custody for %s account %q (add it again with cast account add to put it there)", agent, account)
}
