package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Migration records: a header (migrations/{m}) and one record per session
// (migsessions/{m}/{s}), so sessions of one migration progress without
// contending on one key, and each handover txn compares only its own record.

// maxSessionsPerTxn keeps a create txn under etcd's 128 ops.
const maxSessionsPerTxn = 100

// CreateMigration stores m (its Sessions as separate records). A retry with
// the same request key (RequestKey of m.RequestId and its sender; "" for
// none) returns the migration created first (existed=true).
func (s *Store) CreateMigration(ctx context.Context, m *castv1.Migration, reqKey string) (*fence.MigrationRecord, bool, error) {
	defer s.observe("create_migration", time.Now())
	if err := checkRequestKey(reqKey); err != nil {
		return nil, false, err
	}
	if reqKey != "" {
		if resp, err := s.cli.Get(ctx, s.requestKey(reqKey)); err != nil {
			return nil, false, err
		} else if len(resp.Kvs) > 0 {
			rec, err := s.GetMigration(ctx, string(resp.Kvs[0].Value))
			return rec, true, err
		}
	}
	if resp, err := s.cli.Get(ctx, s.migrationKey(m.Id), clientv3.WithCountOnly()); err != nil {
		return nil, false, err
	} else if resp.Count > 0 { // a retry of a create that landed: never rewrite progress
		rec, err := s.GetMigration(ctx, m.Id)
		return rec, true, err
	}
	now := timestamppb.Now()
	m.CreateTime, m.UpdateTime = now, now
	sessions := m.Sessions
	// Session records first, in batches; the header (and request id) last,
	// so a migration is visible only once it is whole.
	for i := 0; i < len(sessions); i += maxSessionsPerTxn {
		var ops []clientv3.Op
		for _, ms := range sessions[i:min(i+maxSessionsPerTxn, len(sessions))] {
			ms.UpdateTime = now
			val, err := proto.Marshal(ms)
			if err != nil {
				return nil, false, errs.Internal(err, "encode migration session")
			}
			ops = append(ops, clientv3.OpPut(s.migSessKey(m.Id, ms.SessionId), string(val)))
		}
		if _, err := s.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			return nil, false, err
		}
	}
	head := proto.Clone(m).(*castv1.Migration)
	head.Sessions = nil
	val, err := proto.Marshal(head)
	if err != nil {
		return nil, false, errs.Internal(err, "encode migration")
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.migrationKey(m.Id)), "=", 0)}
	ops := []clientv3.Op{clientv3.OpPut(s.migrationKey(m.Id), string(val))}
	if reqKey != "" {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.requestKey(reqKey)), "=", 0))
		ops = append(ops, clientv3.OpPut(s.requestKey(reqKey), m.Id))
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(s.requestKey(reqKey))).Commit()
	if err != nil {
		return nil, false, err
	}
	if !resp.Succeeded {
		s.cleanupMigrationSessions(ctx, m.Id)
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			rec, err := s.GetMigration(ctx, string(kvs[0].Value))
			return rec, true, err
		}
		return nil, false, errs.New(errs.KindAborted, errs.ReasonConflict, "migration id collision; retry")
	}
	rec, err := s.GetMigration(ctx, m.Id)
	return rec, false, err
}

// MigrationForRequest returns the migration created for a request key
// (RequestKey), if any (a retried start answers with it before checking
// anything else).
func (s *Store) MigrationForRequest(ctx context.Context, reqKey string) (*fence.MigrationRecord, bool, error) {
	if err := checkRequestKey(reqKey); err != nil {
		return nil, false, err
	}
	resp, err := s.cli.Get(ctx, s.requestKey(reqKey))
	if err != nil || len(resp.Kvs) == 0 {
		return nil, false, err
	}
	rec, err := s.GetMigration(ctx, string(resp.Kvs[0].Value))
	return rec, err == nil, err
}

func (s *Store) cleanupMigrationSessions(ctx context.Context, id string) {
	_, _ = s.cli.Delete(ctx, s.key("migsessions", id)+"/", clientv3.WithPrefix())
}

// GetMigration reads a migration and its sessions at one revision.
func (s *Store) GetMigration(ctx context.Context, id string) (*fence.MigrationRecord, error) {
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.migrationKey(id)),
		clientv3.OpGet(s.key("migsessions", id)+"/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, err
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil, errs.NotFound("migration %s not found; `cast migrate ls` lists migrations", id).With("migration", id)
	}
	rec := &fence.MigrationRecord{M: &castv1.Migration{}, Rev: kvs[0].ModRevision, SessRevs: map[string]int64{}, ReadAtRev: resp.Header.Revision}
	if err := proto.Unmarshal(kvs[0].Value, rec.M); err != nil {
		return nil, errs.Internal(err, "decode migration")
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		ms := &castv1.MigrationSession{}
		if err := proto.Unmarshal(kv.Value, ms); err != nil {
			return nil, errs.Internal(err, "decode migration session")
		}
		rec.M.Sessions = append(rec.M.Sessions, ms)
		rec.SessRevs[ms.SessionId] = kv.ModRevision
	}
	return rec, nil
}

// WaitCancelRequested returns nil once migration id's header records a
// cancel: it reads the header, then watches it from the revision after
// that read, so a cancel recorded in between is not missed (a watch that
// fell behind a compaction reads again). A header deleted meanwhile is
// NOT_FOUND; ctx ending returns its error.
func (s *Store) WaitCancelRequested(ctx context.Context, id string) error {
	for {
		resp, err := s.cli.Get(ctx, s.migrationKey(id))
		if err != nil {
			return err
		}
		ms, err := decodeProtos[castv1.Migration](resp.Kvs, "migration")
		switch {
		case err != nil:
			return err
		case len(ms) == 0:
			return errs.NotFound("migration %s not found", id).With("migration", id)
		case ms[0].CancelRequested:
			return nil
		}
		if again, err := s.watchCancel(ctx, id, resp.Header.Revision+1); !again {
			return err
		}
	}
}

// watchCancel watches migration id's header from rev until it records a
// cancel (nil), goes (NOT_FOUND), ctx ends, or the watch fails; again is
// true when the history from rev was compacted: read again.
func (s *Store) watchCancel(ctx context.Context, id string, rev int64) (again bool, err error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for b := range s.follow(wctx, s.migrationKey(id), rev) {
		if b.Err != nil {
			return errors.Is(b.Err, rpctypes.ErrCompacted), b.Err
		}
		for _, ev := range b.Events {
			if ev.Type != clientv3.EventTypePut {
				return false, errs.NotFound("migration %s was deleted", id).With("migration", id)
			}
			m := &castv1.Migration{}
			if err := proto.Unmarshal(ev.Kv.Value, m); err != nil {
				return false, errs.Internal(err, "decode watched migration")
			}
			if m.CancelRequested {
				return false, nil
			}
		}
	}
	return false, ctx.Err()
}

// MigrationQuery is one page of the migration listing, newest first.
type MigrationQuery struct {
	Size  int
	Token string
	// Keep, when set, drops migrations from the page (a filter, a user's
	// own migrations); the page is still filled to Size from the
	// migrations after it.
	Keep func(*castv1.Migration) bool
	// Scope names everything else the query asked (its filter,
	// principal): a token handed out under another scope is refused.
	Scope string
}

// QueryMigrations returns up to q.Size migrations after q.Token that q
// keeps, with their sessions, newest first, all read at the revision of
// the listing's first page. Each store read takes one page's worth, never
// every migration ever stored.
func (s *Store) QueryMigrations(ctx context.Context, q MigrationQuery) ([]*castv1.Migration, string, error) {
	defer s.observe("list_migrations", time.Now())
	read := func(before string, n int, rev int64) ([]*castv1.Migration, bool, int64, error) {
		return s.readMigrations(ctx, before, n, rev)
	}
	keep := func(m *castv1.Migration) bool { return q.Keep == nil || q.Keep(m) }
	return queryPage(q.Size, q.Token, q.Scope, "", read, keep, (*castv1.Migration).GetId)
}

// readMigrations reads up to n migrations whose id sorts before before
// ("": the newest), newest first, with their sessions, at rev (0: now),
// and whether more follow. Migration ids are "m" and a ULID, so the
// newest has the greatest key. etcd has no reverse cursor: the ids come
// from a keys-only read sorted descending, then the page's records are
// read by their key range.
//
// That first read is not a page's worth: a sort other than ascending by
// key makes etcd drop the limit (etcdserver/txn rangeLimit), gather every
// key in the range, sort them and keep n, so a page costs O(migrations
// older than it). In etcd 3.7 (the one cast embeds and pins) a keys-only
// read is served from the in-memory key index (mvcc FastKeysOnly), so
// that is an index walk and a sort, no record read from disk. Making it
// O(n) takes a second, reverse-ordered key per migration, read ascending
// with the limit pushed down; left undone because migrations written by
// a replica one minor version older during a rolling upgrade (which the
// version-skew policy allows) would lack that key, so it needs a backfill
// and a release of writing it before one that reads it.
func (s *Store) readMigrations(ctx context.Context, before string, n int, rev int64) ([]*castv1.Migration, bool, int64, error) {
	prefix := s.key("migrations") + "/"
	end := clientv3.GetPrefixRangeEnd(prefix)
	if before != "" {
		end = s.migrationKey(before)
	}
	at := func(opts ...clientv3.OpOption) []clientv3.OpOption {
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		return opts
	}
	keys, err := s.cli.Get(ctx, prefix, at(clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(int64(n)),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))...)
	if err != nil {
		return nil, false, 0, compactedAsToken(err)
	}
	if rev == 0 {
		rev = keys.Header.Revision
	}
	if len(keys.Kvs) == 0 {
		return nil, false, rev, nil
	}
	newest, oldest := string(keys.Kvs[0].Key), string(keys.Kvs[len(keys.Kvs)-1].Key)
	heads, err := s.cli.Get(ctx, oldest, clientv3.WithRange(newest+"\x00"), clientv3.WithRev(rev))
	if err != nil {
		return nil, false, 0, compactedAsToken(err)
	}
	out, err := decodeProtos[castv1.Migration](heads.Kvs, "migration")
	if err != nil {
		return nil, false, 0, err
	}
	slices.Reverse(out)
	// The page's sessions in one read: their keys lie between the oldest's
	// and the newest's (ids are letters and digits); any other is dropped.
	sessions, err := s.cli.Get(ctx, s.key("migsessions", lastPart(oldest))+"/",
		clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.key("migsessions", lastPart(newest))+"/")), clientv3.WithRev(rev))
	if err != nil {
		return nil, false, 0, compactedAsToken(err)
	}
	byID := make(map[string]*castv1.Migration, len(out))
	for _, m := range out {
		byID[m.Id] = m
	}
	for _, kv := range sessions.Kvs {
		id, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), s.key("migsessions")+"/"), "/")
		m := byID[id]
		if m == nil {
			continue
		}
		ms := &castv1.MigrationSession{}
		if err := proto.Unmarshal(kv.Value, ms); err != nil {
			return nil, false, 0, errs.Internal(err, "decode migration session")
		}
		m.Sessions = append(m.Sessions, ms)
	}
	return out, keys.More, rev, nil
}

// UpdateMigrationSession writes ms if its record is still at rev, and
// returns the new revision. A lost race is ABORTED/CONFLICT: reread.
func (s *Store) UpdateMigrationSession(ctx context.Context, migID string, ms *castv1.MigrationSession, rev int64) (int64, error) {
	ms.UpdateTime = timestamppb.Now()
	val, err := proto.Marshal(ms)
	if err != nil {
		return 0, errs.Internal(err, "encode migration session")
	}
	k := s.migSessKey(migID, ms.SessionId)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", rev)).Then(clientv3.OpPut(k, string(val))).Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, errs.New(errs.KindAborted, errs.ReasonConflict, "migration %s session %s changed meanwhile", migID, ms.SessionId)
	}
	return resp.Header.Revision, nil
}

// UpdateMigration applies fn to the header in a compare-and-swap loop.
func (s *Store) UpdateMigration(ctx context.Context, id string, fn func(*castv1.Migration) error) (*castv1.Migration, error) {
	for range 10 {
		resp, err := s.cli.Get(ctx, s.migrationKey(id))
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) == 0 {
			return nil, errs.NotFound("migration %s not found", id).With("migration", id)
		}
		m := &castv1.Migration{}
		if err := proto.Unmarshal(resp.Kvs[0].Value, m); err != nil {
			return nil, errs.Internal(err, "decode migration")
		}
		if err := fn(m); err != nil {
			return nil, err
		}
		m.UpdateTime = timestamppb.Now()
		val, err := proto.Marshal(m)
		if err != nil {
			return nil, errs.Internal(err, "encode migration")
		}
		k := s.migrationKey(id)
		tx, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", resp.Kvs[0].ModRevision)).Then(clientv3.OpPut(k, string(val))).Commit()
		if err != nil {
			return nil, err
		}
		if tx.Succeeded {
			return m, nil
		}
		s.m.TxnConflicts.WithLabelValues("update_migration").Inc()
	}
	return nil, errs.New(errs.KindAborted, errs.ReasonConflict, "migration kept changing; retry")
}
