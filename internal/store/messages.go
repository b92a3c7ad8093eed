package store

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// ExportPageSize is the most messages in one ExportSession page (pages
// are bounded in bytes too: Config.PageBytes).
const ExportPageSize = 500

const (
	// envelopeBatch is how many message envelopes one etcd read fetches
	// while a page fills: inline envelopes are up to ChunkBytes each.
	envelopeBatch = 64
	// msgFrame is what one message adds to a reply beyond its own bytes
	// (field tag and length), with room to spare.
	msgFrame = 16
)

// badToken is the error for a page token this listing cannot have issued.
func badToken(why string) error {
	return errs.New(errs.KindInvalid, errs.ReasonBadPageToken, "page token %s; start the listing again without it", why)
}

// compactedAsToken turns a read at a compacted (or future) revision into
// advice to restart the listing; other errors pass through.
func compactedAsToken(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return errs.New(errs.KindInvalid, errs.ReasonBadPageToken, "the listing expired (store compacted); start it again without a page token")
	case errors.Is(err, rpctypes.ErrFutureRev):
		return badToken("names a store revision that does not exist yet")
	}
	return err
}

// ListMessages returns messages with start <= seq <= end (end 0: newest):
// at most pageSize and about Config.PageBytes of them (always one), and a
// token for the rest. The token resumes only the range asked (start and
// end as the request gave them): under another range its seq would hand
// out messages outside it, or skip some.
func (s *Store) ListMessages(ctx context.Context, sessionID string, start, end int64, pageSize int, token string) ([]*castv1.Message, string, error) {
	defer s.observe("list_messages", time.Now())
	scope := strconv.FormatInt(start, 10) + ":" + strconv.FormatInt(end, 10)
	rev, after, err := s.messageToken(sessionID, scope, token)
	if err != nil {
		return nil, "", err
	}
	if after > 0 {
		start = after
	}
	// Reading the session first (at rev) gives NOT_FOUND for unknown ids
	// rather than an empty page, and pins the snapshot revision.
	sess, r, err := s.getSession(ctx, sessionID, rev)
	if err != nil {
		if rev > 0 && errs.HasReason(err, errs.ReasonNotFound) {
			return nil, "", badToken("is from before this session existed")
		}
		return nil, "", compactedAsToken(err)
	}
	if rev == 0 {
		rev = r
	}
	if after > sess.LastSeq {
		return nil, "", badToken("points past the session's end")
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
	msgs, more, err := s.readRange(ctx, sessionID, start, end, pageSize, s.cfg.PageBytes, rev)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if more && len(msgs) > 0 {
		next = encodeToken(pageToken{After: strconv.FormatInt(msgs[len(msgs)-1].Seq+1, 10), Rev: rev, Session: sessionID, Scope: scope})
	}
	return msgs, next, nil
}

// messageToken decodes a ListMessages page token of sessionID: the
// revision and the seq to resume at (0, 0 without a token); scope is the
// range the token must have been handed out for.
func (s *Store) messageToken(sessionID, scope, token string) (rev, after int64, err error) {
	if token == "" {
		return 0, 0, nil
	}
	t, err := decodeToken(token)
	if err != nil {
		return 0, 0, err
	}
	n, err := strconv.ParseInt(t.After, 10, 64)
	if err != nil || n < 1 {
		return 0, 0, badToken("is malformed")
	}
	if t.Session != sessionID {
		return 0, 0, badToken("belongs to another listing")
	}
	if t.Scope != scope {
		return 0, 0, badToken("was handed out for another start_seq or end_seq")
	}
	return t.Rev, n, nil
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
// at most ExportPageSize messages and Config.PageBytes bytes (the first
// page's budget includes the session), all read at one revision.
func (s *Store) Export(ctx context.Context, sessionID string, page func(*castv1.Session, []*castv1.Message) error) error {
	sess, rev, err := s.getSession(ctx, sessionID, 0)
	if err != nil {
		return err
	}
	if sess.LastSeq == 0 {
		return page(sess, nil)
	}
	hdr := sess
	ahead := s.readAheadFrom(ctx, sessionID, 1, rev)
	defer ahead.stop()
	for start := int64(1); start <= sess.LastSeq; {
		budget := s.cfg.PageBytes
		if hdr != nil {
			budget -= proto.Size(hdr)
		}
		msgs, _, err := s.readRange(ctx, sessionID, start, sess.LastSeq, ExportPageSize, budget, rev)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			return errs.Internal(nil, "transcript has a gap")
		}
		if err := page(hdr, msgs); err != nil {
			return err
		}
		hdr, start = nil, msgs[len(msgs)-1].Seq+1
		ahead.done(start - 1)
	}
	return nil
}
