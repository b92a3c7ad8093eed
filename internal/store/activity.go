package store

import (
	"context"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// LastActive is when session sess (as ListSessions returns it, LastSeq
// filled in) last changed: the later of its record's update (or create)
// time and its newest message's create time. An append does not touch the
// record, so the message is read, from etcd or from its segment.
func (s *Store) LastActive(ctx context.Context, sess *castv1.Session) (time.Time, error) {
	at := sess.GetCreateTime().AsTime()
	if u := sess.GetUpdateTime(); u != nil && u.AsTime().After(at) {
		at = u.AsTime()
	}
	if sess.LastSeq == 0 {
		return at, nil
	}
	rev, err := s.Revision(ctx)
	if err != nil {
		return at, err
	}
	msgs, _, err := s.readRange(ctx, sess.Id, sess.LastSeq, sess.LastSeq, 1, s.cfg.MaxMessageBytes, rev)
	if err != nil {
		return at, err
	}
	if len(msgs) == 1 && msgs[0].CreateTime.AsTime().After(at) {
		at = msgs[0].CreateTime.AsTime()
	}
	return at, nil
}
