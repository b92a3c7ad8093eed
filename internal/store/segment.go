package store

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// A segment is a run of one session's messages in the object store:
// zstd over the magic, a random nonce, the count, then per message its seq,
// length and serialized bytes (as an envelope holds them, seq cleared). Its
// object key is the SHA-256 of those compressed bytes, so a read checks
// what it got against the name it asked for. The nonce makes every move
// attempt's object distinct: a segment a crashed attempt left (an orphan)
// is never the object a later attempt commits, so the orphan sweep cannot
// delete a segment an index entry points at by racing a rewrite of it.
const segMagic = "CASTSEG1"

// segObjPrefix is where segments live in the object store.
const segObjPrefix = "segments/"

type segMsg struct {
	seq int64
	raw []byte
}

var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
)

// encodeSegment returns the object and its digest.
func encodeSegment(msgs []segMsg) ([]byte, [32]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(segMagic)
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, [32]byte{}, err
	}
	buf.Write(nonce[:])
	var tmp [binary.MaxVarintLen64]byte
	put := func(v uint64) { buf.Write(tmp[:binary.PutUvarint(tmp[:], v)]) }
	put(uint64(len(msgs)))
	for _, m := range msgs {
		put(uint64(m.seq))
		put(uint64(len(m.raw)))
		buf.Write(m.raw)
	}
	obj := zenc.EncodeAll(buf.Bytes(), make([]byte, 0, buf.Len()/2))
	return obj, sha256.Sum256(obj), nil
}

// decodeSegment checks obj against digest and returns its messages
// (slices of one buffer: rawBytes sizes it).
func decodeSegment(obj []byte, digest [32]byte, rawBytes int64) ([]segMsg, error) {
	if sha256.Sum256(obj) != digest {
		return nil, fmt.Errorf("store: segment %x does not match its digest", digest[:8])
	}
	b, err := zdec.DecodeAll(obj, make([]byte, 0, rawBytes+rawBytes/16+1024))
	if err != nil {
		return nil, fmt.Errorf("store: segment %x: %w", digest[:8], err)
	}
	if !bytes.HasPrefix(b, []byte(segMagic)) || len(b) < len(segMagic)+16 {
		return nil, fmt.Errorf("store: segment %x has no header", digest[:8])
	}
	rd := bytes.NewReader(b[len(segMagic)+16:])
	n, err := binary.ReadUvarint(rd)
	if err != nil || n > uint64(rd.Len()) {
		return nil, fmt.Errorf("store: segment %x is corrupt", digest[:8])
	}
	out := make([]segMsg, 0, n)
	for range n {
		seq, err1 := binary.ReadUvarint(rd)
		size, err2 := binary.ReadUvarint(rd)
		if err1 != nil || err2 != nil || size > uint64(rd.Len()) {
			return nil, fmt.Errorf("store: segment %x is corrupt", digest[:8])
		}
		at := len(b) - rd.Len()
		out = append(out, segMsg{seq: int64(seq), raw: b[at : at+int(size) : at+int(size)]})
		_, _ = rd.Seek(int64(size), io.SeekCurrent)
	}
	return out, nil
}

func segObjKey(digest [32]byte) string { return segObjPrefix + hex.EncodeToString(digest[:]) }

// segRef is a segment's index entry, etcd key segs/{s}/{last:020d}: keyed
// by its last seq, so the first entry at or after segKey(seq) is the only
// segment that can hold seq.
type segRef struct {
	first, last int64
	rawBytes    int64 // the messages' bytes before compression
	objBytes    int64
	digest      [32]byte
}

func (r segRef) String() string {
	return fmt.Sprintf("%d %d %d %d %x", r.first, r.last, r.rawBytes, r.objBytes, r.digest[:])
}

func parseSegRef(b []byte) (segRef, error) {
	f := strings.Fields(string(b))
	var r segRef
	if len(f) != 5 {
		return r, fmt.Errorf("store: corrupt segment index entry %q", b)
	}
	var nums [4]int64
	for i := range nums {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return r, fmt.Errorf("store: corrupt segment index entry %q", b)
		}
		nums[i] = v
	}
	d, err := hex.DecodeString(f[4])
	if err != nil || len(d) != 32 {
		return r, fmt.Errorf("store: corrupt segment index entry %q", b)
	}
	r.first, r.last, r.rawBytes, r.objBytes = nums[0], nums[1], nums[2], nums[3]
	copy(r.digest[:], d)
	return r, nil
}

func (s *Store) segPrefix(id string) string          { return s.key("segs", id) + "/" }
func (s *Store) segKey(id string, last int64) string { return s.segPrefix(id) + seqKeyPart(last) }
