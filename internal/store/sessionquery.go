package store

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// SessionQuery is one page of a session listing.
type SessionQuery struct {
	Size             int
	Token            string
	IncludeSubagents bool
	// After, without a Token, starts a new listing (at the current
	// revision) with the sessions whose id sorts after it: a caller whose
	// token expired (the store compacted) goes on where it was.
	After string
	// Keep, when set, drops sessions from the page (a filter, a user's own
	// sessions); it sees the live fields (last_seq, node, fenced_by). The
	// page is still filled to Size from the sessions after it.
	Keep func(*castv1.Session) bool
	// Scope names everything else the query asked (its filter, flags,
	// principal): a token handed out under another scope is refused, so a
	// changed filter never resumes at a place the old one chose.
	Scope string
}

// maxScanPages bounds how many store reads one filtered page may take:
// past it the page comes back short with a token for the rest (AIP-158
// allows short pages), so a filter matching almost nothing costs a bounded
// read per call, never the whole keyspace.
const maxScanPages = 8

// ListSessions returns up to pageSize sessions after the token, in id order.
func (s *Store) ListSessions(ctx context.Context, pageSize int, token string, includeSub bool) ([]*castv1.Session, string, error) {
	return s.QuerySessions(ctx, SessionQuery{Size: pageSize, Token: token, IncludeSubagents: includeSub})
}

// ListSessionsAfter starts a listing of up to pageSize sessions whose id
// sorts after after, in id order (SessionQuery.After).
func (s *Store) ListSessionsAfter(ctx context.Context, pageSize int, after string, includeSub bool) ([]*castv1.Session, string, error) {
	return s.QuerySessions(ctx, SessionQuery{Size: pageSize, After: after, IncludeSubagents: includeSub})
}

// QuerySessions returns up to q.Size sessions after q.Token that q keeps,
// in id order, all read at the revision of the listing's first page.
func (s *Store) QuerySessions(ctx context.Context, q SessionQuery) ([]*castv1.Session, string, error) {
	defer s.observe("list_sessions", time.Now())
	read := func(after string, n int, rev int64) ([]*castv1.Session, bool, int64, error) {
		return s.readSessions(ctx, after, n, rev)
	}
	return queryPage(q.Size, q.Token, q.Scope, q.After, read, q.keeps, (*castv1.Session).GetId)
}

// queryPage is one page of a listing the store reads a page at a time:
// up to size items after token (or after start, for a new listing) that
// keep keeps, read by read at the revision of the listing's first page
// (read's rev 0: now, and it returns the revision it read at). key is an
// item's place in the listing, which read resumes after. At most
// maxScanPages reads fill a page; past them it comes back short with a
// token for the rest.
func queryPage[T any](size int, token, scope, start string,
	read func(after string, n int, rev int64) ([]T, bool, int64, error),
	keep func(T) bool, key func(T) string) ([]T, string, error) {
	size = max(size, 1)
	after, rev := start, int64(0)
	if token != "" {
		t, err := decodeToken(token)
		if err != nil {
			return nil, "", err
		}
		if t.Scope != scope {
			return nil, "", badToken("was handed out for another filter or other flags")
		}
		after, rev = t.After, t.Rev
	}
	var out []T
	for range maxScanPages {
		chunk, more, r, err := read(after, size, rev)
		if err != nil {
			return nil, "", err
		}
		rev = r
		for i, it := range chunk {
			if !keep(it) {
				continue
			}
			out = append(out, it)
			if len(out) == size {
				if i == len(chunk)-1 && !more {
					return out, "", nil
				}
				return out, encodeToken(pageToken{After: key(it), Rev: rev, Scope: scope}), nil
			}
		}
		if !more || len(chunk) == 0 {
			return out, "", nil
		}
		after = key(chunk[len(chunk)-1])
	}
	return out, encodeToken(pageToken{After: after, Rev: rev, Scope: scope}), nil
}

func (q SessionQuery) keeps(sess *castv1.Session) bool {
	if sess.Subagent && !q.IncludeSubagents {
		return false
	}
	return q.Keep == nil || q.Keep(sess)
}

// readSessions reads up to n session records after the id after at rev
// (0: now) with their live fields, and whether more follow.
func (s *Store) readSessions(ctx context.Context, after string, n int, rev int64) ([]*castv1.Session, bool, int64, error) {
	start := s.key("sessions") + "/"
	if after != "" {
		start = s.sessionKey(after) + "\x00"
	}
	opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.key("sessions") + "/")), clientv3.WithLimit(int64(n))}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.cli.Get(ctx, start, opts...)
	if err != nil {
		return nil, false, 0, compactedAsToken(err)
	}
	if rev == 0 {
		rev = resp.Header.Revision
	}
	out, err := decodeProtos[castv1.Session](resp.Kvs, "session")
	if err != nil {
		return nil, false, 0, err
	}
	if err := s.fillLive(ctx, out, rev); err != nil {
		return nil, false, 0, err
	}
	return out, resp.More, rev, nil
}
