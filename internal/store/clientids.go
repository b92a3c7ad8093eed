package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// cidRecord is the value of cids/{s}/{cid}, written once by the txn that
// commits the message: "seq digest create_time_ns attempt" ("-": inline).
// Records from before chunk attempts hold only the seq.
//
// The body digest lives here, not in the envelope, because the append txn
// reads this key anyway: a retry is told apart from a reuse of the id with
// no extra read, however large the message. The create time is kept so a
// retry gets back the committed message exactly, and the attempt so the
// chunk sweep knows which chunks the committed envelope points at.
type cidRecord struct {
	seq     int64
	digest  string // "" in a record from before digests
	ctime   int64  // unix ns
	attempt string // "" when inline (or unknown)
}

func (r cidRecord) String() string {
	a := r.attempt
	if a == "" {
		a = "-"
	}
	return fmt.Sprintf("%d %s %d %s", r.seq, r.digest, r.ctime, a)
}

func parseCidRecord(b []byte) (cidRecord, error) {
	f := strings.Fields(string(b))
	var r cidRecord
	var err error
	if len(f) != 1 && len(f) != 4 {
		return r, fmt.Errorf("store: corrupt client id record %q", b)
	}
	if r.seq, err = strconv.ParseInt(f[0], 10, 64); err != nil {
		return r, fmt.Errorf("store: corrupt client id record %q", b)
	}
	if len(f) == 4 {
		r.digest = f[1]
		if r.ctime, err = strconv.ParseInt(f[2], 10, 64); err != nil {
			return r, fmt.Errorf("store: corrupt client id record %q", b)
		}
		if f[3] != "-" {
			r.attempt = f[3]
		}
	}
	return r, nil
}

func newCidRecord(seq int64, p prepared) cidRecord {
	return cidRecord{seq: seq, digest: p.digest, ctime: p.msg.CreateTime.AsTime().UnixNano(), attempt: p.attempt}
}

// bodyDigest is the SHA-256 of what the client sent: the message without
// the fields the server stamps (seq, create_time). Two appends with one
// client id are the same append iff their digests match.
func bodyDigest(m *castv1.Message) (string, error) {
	seq, ct := m.Seq, m.CreateTime
	m.Seq, m.CreateTime = 0, nil
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	m.Seq, m.CreateTime = seq, ct
	if err != nil {
		return "", errs.Internal(err, "encode message")
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// committed reads the record of a stored client id. A record from before
// digests is completed from the stored message itself.
func (s *Store) committed(ctx context.Context, sessionID string, kv *mvccpb.KeyValue) (cidRecord, error) {
	r, err := parseCidRecord(kv.Value)
	if err != nil || r.digest != "" {
		return r, err
	}
	// The message may be in etcd or, moved, in a segment: readRange
	// reads either, at one revision.
	rev, err := s.Revision(ctx)
	if err != nil {
		return r, err
	}
	msgs, _, err := s.readRange(ctx, sessionID, r.seq, r.seq, 1, s.cfg.MaxMessageBytes, rev)
	if err != nil {
		return r, err
	}
	if len(msgs) == 0 {
		return r, errs.Internal(nil, "client id points at a missing message")
	}
	m := msgs[0]
	r.ctime = m.CreateTime.AsTime().UnixNano()
	r.digest, err = bodyDigest(m)
	return r, err
}

// answerRetry makes m the committed message of rec, or refuses m when the
// client id was stored with another body.
func answerRetry(m *castv1.Message, digest string, rec cidRecord) error {
	if rec.digest != digest {
		return errs.New(errs.KindAlreadyExists, errs.ReasonClientIDReused,
			"client_id %q is already stored as message %d with a different body; use a new id for a new message", m.ClientId, rec.seq).
			With("seq", strconv.FormatInt(rec.seq, 10)).With("client_id", m.ClientId)
	}
	m.Seq = rec.seq
	m.CreateTime = timestamppb.New(time.Unix(0, rec.ctime))
	return nil
}
