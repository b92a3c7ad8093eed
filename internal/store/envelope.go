package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
)

// A message value is an envelope: one format byte, then either the message's
// proto bytes (inline) or a pointer to its chunks. Chunking the serialized
// bytes (not a field) makes reading back byte-exact for any field.
const (
	envInline byte = 1
	// envChunked points at blobs/{s}/{cid}/: chunks keyed by client id,
	// which a retry rewrote. Still read; no longer written.
	envChunked byte = 2
	// envAttempt points at chunks/{s}/{cid}/{attempt}/: keys unique to one
	// append attempt, written once and never again, so nothing a later
	// attempt (a retry, a refused owner write) does can touch them.
	envAttempt byte = 3
)

// chunkRef is the pointer stored for a chunked message.
type chunkRef struct {
	format  byte
	cid     string
	attempt string // envAttempt only
	n       int
	size    int
	digest  [32]byte
}

func encodeInline(b []byte) []byte {
	return append([]byte{envInline}, b...)
}

// kindField is Message.kind's field number.
var kindField = (&castv1.Message{}).ProtoReflect().Descriptor().Fields().ByName("kind").Number()

// inlineKind is the kind of the message an inline envelope holds, read from
// its bytes without decoding the rest (a field absent is its zero value);
// ok is false for a chunked envelope or bytes that do not parse, which only
// a full decode can tell.
func inlineKind(val []byte) (kind castv1.MessageKind, ok bool) {
	if len(val) == 0 || val[0] != envInline {
		return 0, false
	}
	for b := val[1:]; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num == kindField && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, false
			}
			kind, b = castv1.MessageKind(v), b[n:] // the last one counts, as in a decode
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, false
		}
		b = b[n:]
	}
	return kind, true
}

func encodeChunkRef(r chunkRef) []byte {
	var buf bytes.Buffer
	buf.WriteByte(r.format)
	var tmp [binary.MaxVarintLen64]byte
	buf.Write(tmp[:binary.PutUvarint(tmp[:], uint64(r.n))])
	buf.Write(tmp[:binary.PutUvarint(tmp[:], uint64(r.size))])
	buf.Write(r.digest[:])
	buf.WriteString(r.cid)
	if r.format == envAttempt {
		buf.WriteString("/" + r.attempt)
	}
	return buf.Bytes()
}

func decodeChunkRef(b []byte) (chunkRef, error) {
	r := chunkRef{format: b[0]}
	rd := bytes.NewReader(b[1:])
	n, err1 := binary.ReadUvarint(rd)
	size, err2 := binary.ReadUvarint(rd)
	if err1 != nil || err2 != nil || rd.Len() < 32 {
		return r, fmt.Errorf("store: corrupt chunk reference")
	}
	r.n, r.size = int(n), int(size)
	_, _ = rd.Read(r.digest[:])
	rest := make([]byte, rd.Len())
	_, _ = rd.Read(rest)
	r.cid = string(rest)
	if r.format == envAttempt {
		var ok bool
		if r.cid, r.attempt, ok = strings.Cut(r.cid, "/"); !ok {
			return r, fmt.Errorf("store: chunk reference without an attempt")
		}
	}
	return r, nil
}

// chunkPrefix is where one append attempt of a large message keeps its
// chunks; chunkKey is chunk i there.
func (s *Store) chunkPrefix(id, cid, attempt string) string {
	return s.key("chunks", id, cid, attempt) + "/"
}

func (s *Store) chunkKey(id, cid, attempt string, i int) string {
	return fmt.Sprintf("%s%06d", s.chunkPrefix(id, cid, attempt), i)
}

func (s *Store) refPrefix(sessionID string, ref chunkRef) string {
	if ref.format == envAttempt {
		return s.chunkPrefix(sessionID, ref.cid, ref.attempt)
	}
	return s.blobPrefix(sessionID, ref.cid)
}

// envelopeSize is the serialized size of the message an envelope holds,
// known without reading its chunks (pages are bounded in bytes by it).
func envelopeSize(val []byte) (int, error) {
	if len(val) == 0 {
		return 0, fmt.Errorf("store: empty message value")
	}
	switch val[0] {
	case envInline:
		return len(val) - 1, nil
	case envChunked, envAttempt:
		ref, err := decodeChunkRef(val)
		return ref.size, err
	}
	return 0, fmt.Errorf("store: unknown envelope format %d", val[0])
}

// decodeMessage turns an envelope into a Message, fetching chunks at rev
// (0: latest) when the message was chunked.
func (s *Store) decodeMessage(ctx context.Context, sessionID string, val []byte, rev int64) (*castv1.Message, error) {
	raw, _, err := s.messageBytes(ctx, sessionID, val, rev)
	if err != nil {
		return nil, err
	}
	m := &castv1.Message{}
	if err := proto.Unmarshal(raw, m); err != nil {
		return nil, fmt.Errorf("store: decode message: %w", err)
	}
	return m, nil
}

// messageBytes is the marshalled message an envelope holds: inline, or
// read from its chunks at rev (0: latest), whose key prefix is chunks
// ("" for an inline one).
func (s *Store) messageBytes(ctx context.Context, sessionID string, val []byte, rev int64) (raw []byte, chunks string, err error) {
	if len(val) == 0 {
		return nil, "", fmt.Errorf("store: empty message value")
	}
	switch val[0] {
	case envInline:
		return val[1:], "", nil
	case envChunked, envAttempt:
		ref, err := decodeChunkRef(val)
		if err != nil {
			return nil, "", err
		}
		raw, err := s.readChunks(ctx, sessionID, ref, rev)
		return raw, s.refPrefix(sessionID, ref), err
	}
	return nil, "", fmt.Errorf("store: unknown envelope format %d", val[0])
}

// readChunks reads a message's chunks at rev. Attempt chunks never change
// once written, so when rev has been compacted away (a slow watcher, or the
// NOSPACE recovery's compaction) the latest revision holds the same bytes;
// the digest check proves it.
func (s *Store) readChunks(ctx context.Context, sessionID string, ref chunkRef, rev int64) ([]byte, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
	resp, err := s.cli.Get(ctx, s.refPrefix(sessionID, ref), append(opts, clientv3.WithRev(rev))...)
	if rev > 0 && ref.format == envAttempt && errors.Is(err, rpctypes.ErrCompacted) {
		resp, err = s.cli.Get(ctx, s.refPrefix(sessionID, ref), opts...)
	}
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) != ref.n {
		return nil, fmt.Errorf("store: message %s has %d of %d chunks", ref.cid, len(resp.Kvs), ref.n)
	}
	out := make([]byte, 0, ref.size)
	for _, kv := range resp.Kvs {
		out = append(out, kv.Value...)
	}
	if len(out) != ref.size || sha256.Sum256(out) != ref.digest {
		return nil, fmt.Errorf("store: message %s chunks do not match their digest", ref.cid)
	}
	return out, nil
}

// encoded is a message serialized and checked, nothing written yet.
type encoded struct {
	msg    *castv1.Message
	raw    []byte
	digest string // bodyDigest of msg
}

// encode serializes m (seq cleared, create time set) and refuses it when it
// is too large, before anything is written.
func (s *Store) encode(m *castv1.Message) (encoded, error) {
	digest, err := bodyDigest(m)
	if err != nil {
		return encoded{}, err
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return encoded{}, errs.Internal(err, "encode message")
	}
	if len(raw) > s.cfg.MaxMessageBytes {
		return encoded{}, errs.New(errs.KindResourceExhausted, errs.ReasonMessageTooLarge,
			"message is %d bytes; the limit is %d", len(raw), s.cfg.MaxMessageBytes).
			With("limit_bytes", fmt.Sprint(s.cfg.MaxMessageBytes))
	}
	return encoded{msg: m, raw: raw, digest: digest}, nil
}

// CheckMessage refuses m as Append would for its size, writing nothing:
// a caller that stores something first (a session) checks its message
// before, so a refusal leaves nothing behind. m is not changed.
func (s *Store) CheckMessage(m *castv1.Message) error {
	cp := proto.Clone(m).(*castv1.Message)
	cp.Seq = 0
	if cp.CreateTime == nil {
		cp.CreateTime = timestamppb.Now()
	}
	_, err := s.encode(cp)
	return err
}

// chunks is how many chunk keys e needs (0: stored inline).
func (s *Store) chunks(e encoded) int {
	if len(e.raw) <= s.cfg.ChunkBytes {
		return 0
	}
	return (len(e.raw) + s.cfg.ChunkBytes - 1) / s.cfg.ChunkBytes
}

// prepared is a message ready to commit: its envelope value, and for a
// chunked message the attempt its chunks were written under and a compare
// that holds only while they are all still there.
type prepared struct {
	msg      *castv1.Message
	envelope []byte
	size     int
	digest   string
	attempt  string         // "" when inline
	chunk0   string         // key of the attempt's first chunk
	cmps     []clientv3.Cmp // the chunks still exist
}

// prepare serializes m (seq and time already set) and prepares it.
func (s *Store) prepare(ctx context.Context, sessionID string, m *castv1.Message) (prepared, error) {
	e, err := s.encode(m)
	if err != nil {
		return prepared{}, err
	}
	return s.writeChunks(ctx, sessionID, e)
}

// writeChunks writes a large message's chunks under a new attempt, in their
// own transactions, before the envelope that points at them is committed.
// The keys are unique to this attempt, so a retry or a refused append can
// only ever leave orphans (collected by SweepChunks), never touch chunks a
// committed envelope points at. The sweep deletes an attempt's chunks in
// one txn, chunk 0 included, and chunk 0 is written first; so "chunk 0
// exists" at commit time proves every chunk is there.
func (s *Store) writeChunks(ctx context.Context, sessionID string, e encoded) (prepared, error) {
	raw, m := e.raw, e.msg
	if s.chunks(e) == 0 {
		return prepared{msg: m, envelope: encodeInline(raw), size: len(raw), digest: e.digest}, nil
	}
	ref := chunkRef{format: envAttempt, cid: m.ClientId, attempt: ids.NewClientID(), size: len(raw), digest: sha256.Sum256(raw)}
	// Two chunks per txn keeps each request near 512 KiB.
	var ops []clientv3.Op
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		_, err := s.cli.Txn(ctx).Then(ops...).Commit()
		ops = ops[:0]
		return err
	}
	for off := 0; off < len(raw); off += s.cfg.ChunkBytes {
		end := min(off+s.cfg.ChunkBytes, len(raw))
		ops = append(ops, clientv3.OpPut(s.chunkKey(sessionID, ref.cid, ref.attempt, ref.n), string(raw[off:end])))
		ref.n++
		if len(ops) == 2 {
			if err := flush(); err != nil {
				return prepared{}, err
			}
		}
	}
	if err := flush(); err != nil {
		return prepared{}, err
	}
	s.m.TranscriptBytes.Add(float64(len(raw)))
	env := encodeChunkRef(ref)
	chunk0 := s.chunkKey(sessionID, ref.cid, ref.attempt, 0)
	return prepared{msg: m, envelope: env, size: len(env), digest: e.digest, attempt: ref.attempt, chunk0: chunk0,
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(chunk0), ">", 0)}}, nil
}
