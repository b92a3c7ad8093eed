package store

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// ExportPageSize is the page size of ExportSession.
const ExportPageSize = 500

// compactedAsToken turns a read at a compacted revision into advice to
// restart the listing; other errors pass through.
func compactedAsToken(err error) error {
	if errors.Is(err, rpctypes.ErrCompacted) {
		return errs.New(errs.KindInvalid, errs.ReasonBadPageToken, "the listing expired (store compacted); start it again without a page token")
	}
	return err
}

// ListMessages returns messages with start <= seq <= end (end 0: newest),
// at most pageSize, and a token for the rest.
func (s *Store) ListMessages(ctx context.Context, sessionID string, start, end int64, pageSize int, token string) ([]*castv1.Message, string, error) {
	defer s.observe("list_messages", time.Now())
	rev := int64(0)
	if token != "" {
		t, err := decodeToken(token)
		if err != nil {
			return nil, "", err
		}
		n, err := strconv.ParseInt(t.After, 10, 64)
		if err != nil || n < 1 {
			return nil, "", errs.New(errs.KindInvalid, errs.ReasonBadPageToken, "page token is malformed; start the listing again without it")
		}
		start, rev = n, t.Rev
	}
	// Reading the session first (at rev) gives NOT_FOUND for unknown ids
	// rather than an empty page, and pins the snapshot revision.
	sess, r, err := s.getSession(ctx, sessionID, rev)
	if err != nil {
		return nil, "", compactedAsToken(err)
	}
	if rev == 0 {
		rev = r
	}
	if start < 1 {
		start = 1
	}
	if end <= 0 || end > sess.LastSeq {
		end = sess.LastSeq
	}
	if start > end {
		return nil, "", nil
	}
	msgs, more, err := s.readRange(ctx, sessionID, start, end, pageSize, rev)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if more && len(msgs) > 0 {
		next = encodeToken(pageToken{After: strconv.FormatInt(msgs[len(msgs)-1].Seq+1, 10), Rev: rev})
	}
	return msgs, next, nil
}

// readRange reads up to limit messages with start <= seq <= end at rev.
func (s *Store) readRange(ctx context.Context, sessionID string, start, end int64, limit int, rev int64) ([]*castv1.Message, bool, error) {
	resp, err := s.cli.Get(ctx, s.msgKey(sessionID, start),
		clientv3.WithRange(s.msgKey(sessionID, end+1)), clientv3.WithLimit(int64(limit)), clientv3.WithRev(rev))
	if err != nil {
		return nil, false, compactedAsToken(err)
	}
	out := make([]*castv1.Message, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m, err := s.decodeKV(ctx, sessionID, kv.Key, kv.Value, rev)
		if err != nil {
			return nil, false, errs.Internal(err, "decode message")
		}
		out = append(out, m)
	}
	return out, resp.More, nil
}

func (s *Store) decodeKV(ctx context.Context, sessionID string, key, val []byte, rev int64) (*castv1.Message, error) {
	m, err := s.decodeMessage(ctx, sessionID, val, rev)
	if err != nil {
		return nil, err
	}
	m.Seq, err = strconv.ParseInt(lastPart(string(key)), 10, 64)
	return m, err
}

// Export calls page with the session and then every message in pages of
// ExportPageSize, all read at one revision.
func (s *Store) Export(ctx context.Context, sessionID string, page func(*castv1.Session, []*castv1.Message) error) error {
	sess, rev, err := s.getSession(ctx, sessionID, 0)
	if err != nil {
		return err
	}
	if sess.LastSeq == 0 {
		return page(sess, nil)
	}
	first := true
	for start := int64(1); start <= sess.LastSeq; {
		msgs, _, err := s.readRange(ctx, sessionID, start, sess.LastSeq, ExportPageSize, rev)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			return errs.Internal(nil, "transcript has a gap")
		}
		var hdr *castv1.Session
		if first {
			hdr, first = sess, false
		}
		if err := page(hdr, msgs); err != nil {
			return err
		}
		start = msgs[len(msgs)-1].Seq + 1
	}
	return nil
}
