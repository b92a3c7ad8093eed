package store

import (
	"context"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
)

// CreateSession stores a session owned by p.Node in one txn: record, seq
// counter, owner key (whose revision becomes the token) and owner index.
func (s *Store) CreateSession(ctx context.Context, p fence.CreateParams) (fence.Created, error) {
	defer s.observe("create_session", time.Now())
	if err := s.checkQuota(1024); err != nil {
		return fence.Created{}, err
	}
	if err := checkRequestKey(p.RequestID); err != nil {
		return fence.Created{}, err
	}
	for range 5 {
		sess := newSessionRecord(p, ids.NewSessionID())
		resp, err := s.createTxn(ctx, p, sess)
		if err != nil {
			return fence.Created{}, err
		}
		if resp.Succeeded {
			sess.Node = p.Node
			return fence.Created{Session: sess, Token: resp.Header.Revision}, nil
		}
		if c, done, err := s.createRefused(ctx, p, resp); done {
			return c, err
		}
		s.m.TxnConflicts.WithLabelValues("create_session").Inc() // id collision
	}
	return fence.Created{}, errs.New(errs.KindAborted, errs.ReasonConflict, "could not pick a free session id; retry")
}

// newSessionRecord is the record of a new idle session id made by p.
func newSessionRecord(p fence.CreateParams, id string) *castv1.Session {
	now := timestamppb.Now()
	branch := p.WorktreeBranch
	if branch == "" && p.DefaultWorktree {
		branch = ids.DefaultBranch(p.Title, id)
	}
	sess := &castv1.Session{
		Id: id, Agent: p.Agent, Model: p.Model, Cwd: p.Cwd, Title: p.Title,
		State: castv1.SessionState_SESSION_STATE_IDLE, CreateTime: now, UpdateTime: now,
		ParentId: p.ParentID, ParentCallId: p.ParentCallID, Subagent: p.Subagent, RootId: p.RootID, ForkedAtSeq: p.ForkedAtSeq, Effort: p.Effort, HistorySeq: p.HistorySeq, HandoffFrom: p.HandoffFrom, Account: p.Account, WorktreeBranch: branch,
		Creator: p.Creator, Origin: p.Origin,
	}
	if sess.RootId == "" {
		sess.RootId = id
	}
	return sess
}

// createTxn writes sess if its id is free, its node still connected (or
// none is, for p.Node "") and p's request id unused; else it reads the
// request id's session and the node's connection, for createRefused.
func (s *Store) createTxn(ctx context.Context, p fence.CreateParams, sess *castv1.Session) (*clientv3.TxnResponse, error) {
	id := sess.Id
	val, err := proto.Marshal(sess)
	if err != nil {
		return nil, errs.Internal(err, "encode session")
	}
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(s.sessionKey(id)), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(s.connKey(p.Node)), ">", 0),
	}
	if p.Node == "" {
		// No node is connected, so none misses it: a node that connects
		// after this commit adopts it in its resync.
		cmps[1] = clientv3.Compare(clientv3.CreateRevision(s.nodeConnPrefix()).WithPrefix(), "=", 0)
	}
	ops := []clientv3.Op{
		clientv3.OpPut(s.sessionKey(id), string(val)),
		clientv3.OpPut(s.seqKey(id), "0"),
		clientv3.OpPut(s.ownerKey(id), p.Node),
		clientv3.OpPut(s.nodeSessKey(p.Node, id), ""),
	}
	if p.RequestID != "" {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.requestKey(p.RequestID)), "=", 0))
		ops = append(ops, clientv3.OpPut(s.requestKey(p.RequestID), id))
	}
	return s.cli.Txn(ctx).If(cmps...).Then(ops...).Else(
		clientv3.OpGet(s.requestKey(p.RequestID)),
		clientv3.OpGet(s.connKey(p.Node)),
	).Commit()
}

// createRefused says what a refused createTxn means: the session a retry
// of the same request made, the node gone, or (done false) an id that was
// taken, to try again with another.
func (s *Store) createRefused(ctx context.Context, p fence.CreateParams, resp *clientv3.TxnResponse) (_ fence.Created, done bool, _ error) {
	if p.RequestID != "" {
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			got, err := s.GetSession(ctx, string(kvs[0].Value))
			if err != nil {
				return fence.Created{}, true, err
			}
			if err := sameLineage(p, got); err != nil {
				return fence.Created{}, true, err
			}
			_, tok, err := s.Owner(ctx, got.Id)
			return fence.Created{Session: got, Token: tok, Existed: true}, true, err
		}
	}
	if p.Node == "" {
		return fence.Created{}, true, errs.New(errs.KindAborted, errs.ReasonConflict,
			"a node connected while the session was stored for the first node to connect; place it again")
	}
	if len(resp.Responses[1].GetResponseRange().Kvs) == 0 {
		return fence.Created{}, true, errs.New(errs.KindFailedPrecondition, errs.ReasonNodeNotConn,
			"node %q is not connected", p.Node).With("node", p.Node)
	}
	return fence.Created{}, false, nil
}

// sameLineage refuses a request id reused for a different kind of create:
// a fork, a handoff or a worker handed the session another create made
// would go on to write into it (a fork notice, a brief as its prompt).
// Only what never changes after the create is compared; a retry may see
// the session renamed or switched since.
func sameLineage(p fence.CreateParams, got *castv1.Session) error {
	if got.ParentId == p.ParentID && got.ParentCallId == p.ParentCallID && got.HandoffFrom == p.HandoffFrom &&
		got.Subagent == p.Subagent {
		return nil
	}
	rid := p.RequestID[strings.LastIndexByte(p.RequestID, '/')+1:]
	return errs.New(errs.KindAlreadyExists, errs.ReasonClientIDReused,
		"request_id %s already made session %s (%s); give this request a new request_id", rid, got.Id, lineage(got)).
		With("session", got.Id)
}

// lineage says how a session was made, for sameLineage's refusal.
func lineage(s *castv1.Session) string {
	switch {
	case s.HandoffFrom != "":
		return "a handoff of " + s.HandoffFrom
	case s.ParentId != "" && s.Subagent:
		return "a worker of " + s.ParentId
	case s.ParentId != "":
		return "a fork of " + s.ParentId
	}
	return "a new session"
}

// GetSession reads a session with its owner and last seq at one revision.
func (s *Store) GetSession(ctx context.Context, id string) (*castv1.Session, error) {
	sess, _, err := s.getSession(ctx, id, 0)
	return sess, err
}

// getSession returns the session and the revision it was read at.
func (s *Store) getSession(ctx context.Context, id string, rev int64) (*castv1.Session, int64, error) {
	defer s.observe("get_session", time.Now())
	var opts []clientv3.OpOption
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.cli.Txn(ctx).Then(s.sessionOps(id, opts...)...).Commit()
	if err != nil {
		return nil, 0, err
	}
	sess, err := decodeSession(id, resp.Responses)
	if err != nil {
		return nil, 0, err
	}
	return sess, resp.Header.Revision, nil
}

// sessionOps reads what a Session is made of; decodeSession assembles it.
func (s *Store) sessionOps(id string, opts ...clientv3.OpOption) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpGet(s.sessionKey(id), opts...),
		clientv3.OpGet(s.seqKey(id), opts...),
		clientv3.OpGet(s.ownerKey(id), opts...),
		clientv3.OpGet(s.fenceKey(id), opts...),
	}
}

// decodeSession builds a Session from the responses to sessionOps.
func decodeSession(id string, r []*etcdserverpb.ResponseOp) (*castv1.Session, error) {
	kvs := r[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil, errs.NotFound("session %s not found; `cast ls` lists sessions", id).With("session", id)
	}
	sess := &castv1.Session{}
	if err := proto.Unmarshal(kvs[0].Value, sess); err != nil {
		return nil, errs.Internal(err, "decode session")
	}
	if seq := r[1].GetResponseRange().Kvs; len(seq) > 0 {
		sess.LastSeq, _ = parseInt(seq[0].Value)
	}
	if own := r[2].GetResponseRange().Kvs; len(own) > 0 {
		sess.Node = string(own[0].Value)
	}
	if f := r[3].GetResponseRange().Kvs; len(f) > 0 {
		sess.FencedBy = string(f[0].Value)
	}
	return sess, nil
}

// Owner returns the owner node and its fencing token.
func (s *Store) Owner(ctx context.Context, id string) (string, int64, error) {
	resp, err := s.cli.Get(ctx, s.ownerKey(id))
	if err != nil {
		return "", 0, err
	}
	if len(resp.Kvs) == 0 {
		return "", 0, errs.NotFound("session %s not found; `cast ls` lists sessions", id).With("session", id)
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision, nil
}

// fillLive sets last_seq, node and fenced_by on listed sessions from their
// seq, owner and fence keys, read at the listing's revision.
func (s *Store) fillLive(ctx context.Context, list []*castv1.Session, rev int64) error {
	if len(list) == 0 {
		return nil
	}
	first, last := list[0].Id, list[len(list)-1].Id
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.seqKey(first), clientv3.WithRange(s.seqKey(last)+"\x00"), clientv3.WithRev(rev)),
		clientv3.OpGet(s.ownerKey(first), clientv3.WithRange(s.ownerKey(last)+"\x00"), clientv3.WithRev(rev)),
		clientv3.OpGet(s.fenceKey(first), clientv3.WithRange(s.fenceKey(last)+"\x00"), clientv3.WithRev(rev)),
	).Commit()
	if err != nil {
		return compactedAsToken(err)
	}
	seqs, owners := map[string]int64{}, map[string]string{}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		seqs[lastPart(string(kv.Key))], _ = parseInt(kv.Value)
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		owners[lastPart(string(kv.Key))] = string(kv.Value)
	}
	fences := map[string]string{}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		fences[lastPart(string(kv.Key))] = string(kv.Value)
	}
	for _, sess := range list {
		sess.LastSeq, sess.Node, sess.FencedBy = seqs[sess.Id], owners[sess.Id], fences[sess.Id]
	}
	return nil
}

func lastPart(k string) string {
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == '/' {
			return k[i+1:]
		}
	}
	return k
}

func (s *Store) observe(op string, start time.Time) {
	s.m.RequestSeconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// PurgeSession deletes a session and every key stored under it (record,
// seq counter, owner and its index, messages, client ids, chunks,
// permission requests, pending ops) in one txn, which also records the
// owner node's release for the relay (releaseOp), compared against the record check
// accepted (with its LastSeq filled in): a session that changed meanwhile
// — its record, a new message, a move of its history — is read and
// checked again, a fenced (moving) one is refused. Chunks of an append
// still writing are left to SweepChunks, which deletes those of deleted
// sessions. The session's segments in the object store are deleted once
// the txn committed; one that fails to delete (or that a move wrote but
// never committed) is an orphan SweepSegments deletes.
func (s *Store) PurgeSession(ctx context.Context, id string, check func(*castv1.Session) error) error {
	defer s.observe("purge_session", time.Now())
	lease := clientv3.NoLease // of the owner's release, granted once one is needed
	for range 10 {
		resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.sessionKey(id)), clientv3.OpGet(s.ownerKey(id)),
			clientv3.OpGet(s.fenceKey(id)), clientv3.OpGet(s.seqKey(id)), clientv3.OpGet(s.segPrefix(id), clientv3.WithPrefix())).Commit()
		if err != nil {
			return err
		}
		kvs, own := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
		if len(kvs) == 0 || len(own) == 0 {
			return errs.NotFound("session %s not found; `cast ls` lists sessions", id).With("session", id)
		}
		if fk := resp.Responses[2].GetResponseRange().Kvs; len(fk) > 0 {
			return errs.New(errs.KindFailedPrecondition, errs.ReasonSessionFenced,
				"session %s is moving (migration %s); remove it when the move ends", id, fk[0].Value).With("migration", string(fk[0].Value))
		}
		sess := &castv1.Session{}
		if err := proto.Unmarshal(kvs[0].Value, sess); err != nil {
			return errs.Internal(err, "decode session")
		}
		seqKV := resp.Responses[3].GetResponseRange().Kvs
		var seqRev int64
		if len(seqKV) > 0 {
			sess.LastSeq, _ = parseInt(seqKV[0].Value)
			seqRev = seqKV[0].ModRevision
		}
		if err := check(sess); err != nil {
			return err
		}
		segs := resp.Responses[4].GetResponseRange().Kvs
		ops := s.purgeOps(id, string(own[0].Value))
		if node := string(own[0].Value); node != "" {
			if lease == clientv3.NoLease {
				l, err := s.cli.Grant(ctx, nodeCmdTTL)
				if err != nil {
					return err
				}
				lease = l.ID
			}
			op, err := s.releaseOp(node, id, lease)
			if err != nil {
				return err
			}
			ops = append(ops, op)
		}
		txn, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(s.sessionKey(id)), "=", kvs[0].ModRevision),
			clientv3.Compare(clientv3.ModRevision(s.ownerKey(id)), "=", own[0].ModRevision),
			clientv3.Compare(clientv3.CreateRevision(s.fenceKey(id)), "=", 0),
			clientv3.Compare(clientv3.ModRevision(s.seqKey(id)), "=", seqRev),
			clientv3.Compare(clientv3.ModRevision(s.segPrefix(id)), "<", resp.Header.Revision+1).WithPrefix(),
		).Then(ops...).Commit()
		if err != nil {
			return err
		}
		if txn.Succeeded {
			s.deleteSegments(ctx, id, segs)
			return nil
		}
		s.m.TxnConflicts.WithLabelValues("purge_session").Inc()
	}
	return errs.New(errs.KindAborted, errs.ReasonConflict, "session %s kept changing; retry", id)
}

// releaseOp records, for the relay to node (as SendNodeCommand does), the
// release of purged session id, in the purge's txn: whichever replica
// holds node's stream sends it, and a node connected nowhere is released
// when it registers again (its resync).
func (s *Store) releaseOp(node, id string, lease clientv3.LeaseID) (clientv3.Op, error) {
	cmd := &castv1.Command{Id: ids.NewClientID(), Kind: &castv1.Command_ReleaseSession{
		ReleaseSession: &castv1.ReleaseSession{SessionId: id}}}
	val, err := proto.Marshal(cmd)
	if err != nil {
		return clientv3.Op{}, errs.Internal(err, "encode command")
	}
	return clientv3.OpPut(s.nodeCmdKey(node, cmd.Id), string(val), clientv3.WithLease(lease)), nil
}

// purgeOps deletes every key of session id, owned by node.
func (s *Store) purgeOps(id, node string) []clientv3.Op {
	ops := []clientv3.Op{
		clientv3.OpDelete(s.sessionKey(id)), clientv3.OpDelete(s.seqKey(id)), clientv3.OpDelete(s.ownerKey(id)),
		clientv3.OpDelete(s.nodeSessKey(node, id)),
	}
	for _, prefix := range []string{s.msgPrefix(id), s.key("cids", id) + "/", s.key("chunks", id) + "/", s.key("blobs", id) + "/", s.segPrefix(id), s.key("perms", id) + "/", s.key("ops", id) + "/", s.key("migrated", id) + "/"} {
		ops = append(ops, clientv3.OpDelete(prefix, clientv3.WithPrefix()))
	}
	return ops
}
