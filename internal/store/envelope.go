package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A message value is an envelope: one format byte, then either the message's
// proto bytes (inline) or a pointer to its chunks. Chunking the serialized
// bytes (not a field) makes reading back byte-exact for any field.
const (
	envInline  byte = 1
	envChunked byte = 2
)

// chunkRef is the pointer stored for a chunked message.
type chunkRef struct {
	cid    string
	n      int
	size   int
	digest [32]byte
}

func encodeInline(b []byte) []byte {
	return append([]byte{envInline}, b...)
}

func encodeChunkRef(r chunkRef) []byte {
	var buf bytes.Buffer
	buf.WriteByte(envChunked)
	var tmp [binary.MaxVarintLen64]byte
	buf.Write(tmp[:binary.PutUvarint(tmp[:], uint64(r.n))])
	buf.Write(tmp[:binary.PutUvarint(tmp[:], uint64(r.size))])
	buf.Write(r.digest[:])
	buf.WriteString(r.cid)
	return buf.Bytes()
}

func decodeChunkRef(b []byte) (chunkRef, error) {
	var r chunkRef
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
	return r, nil
}

// decodeMessage turns an envelope into a Message, fetching chunks at rev
// (0: latest) when the message was chunked.
func (s *Store) decodeMessage(ctx context.Context, sessionID string, val []byte, rev int64) (*castv1.Message, error) {
	if len(val) == 0 {
		return nil, fmt.Errorf("store: empty message value")
	}
	var raw []byte
	switch val[0] {
	case envInline:
		raw = val[1:]
	case envChunked:
		ref, err := decodeChunkRef(val)
		if err != nil {
			return nil, err
		}
		if raw, err = s.readChunks(ctx, sessionID, ref, rev); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("store: unknown envelope format %d", val[0])
	}
	m := &castv1.Message{}
	if err := proto.Unmarshal(raw, m); err != nil {
		return nil, fmt.Errorf("store: decode message: %w", err)
	}
	return m, nil
}

func (s *Store) readChunks(ctx context.Context, sessionID string, ref chunkRef, rev int64) ([]byte, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.cli.Get(ctx, s.blobPrefix(sessionID, ref.cid), opts...)
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

// prepared is a message ready to commit: its envelope value, plus the
// chunks that must be written before it when it is large.
type prepared struct {
	msg      *castv1.Message
	envelope []byte
	size     int
}

// prepare serializes m (seq and time already set) and, when it is larger
// than the chunk size, writes its chunks in their own transactions first.
// Chunks are keyed by client id, so a retried append rewrites the same keys.
func (s *Store) prepare(ctx context.Context, sessionID string, m *castv1.Message) (prepared, error) {
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return prepared{}, errs.Internal(err, "encode message")
	}
	if len(raw) > s.cfg.MaxMessageBytes {
		return prepared{}, errs.New(errs.KindResourceExhausted, errs.ReasonMessageTooLarge,
			"message is %d bytes; the limit is %d", len(raw), s.cfg.MaxMessageBytes).
			With("limit_bytes", fmt.Sprint(s.cfg.MaxMessageBytes))
	}
	if len(raw) <= s.cfg.ChunkBytes {
		return prepared{msg: m, envelope: encodeInline(raw), size: len(raw)}, nil
	}
	ref := chunkRef{cid: m.ClientId, size: len(raw), digest: sha256.Sum256(raw)}
	prefix := s.blobPrefix(sessionID, m.ClientId)
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
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s%06d", prefix, ref.n), string(raw[off:end])))
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
	env := encodeChunkRef(ref)
	return prepared{msg: m, envelope: env, size: len(env)}, nil
}
