package opencode

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
)

// OpenCode ids are prefix_ + 12 hex digits of the low 48 bits of
// (unix ms * 0x1000 + counter) + 14 base62 characters. Rows are ordered by
// id, so message and part ids must ascend in conversation order; session ids
// use the bitwise complement so newer sessions sort first.
const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// idGen hands out ascending ids starting at a time. The random tail is
// derived from seed, so one input gives the same ids every time.
type idGen struct {
	next uint64 // ms*0x1000 + counter of the next id
	seed [32]byte
	n    uint64
}

func newIDGen(at time.Time, seed string) *idGen {
	return &idGen{next: uint64(at.UnixMilli()) * 0x1000, seed: sha256.Sum256([]byte(seed))}
}

func (g *idGen) tail() string {
	var buf [40]byte
	copy(buf[:32], g.seed[:])
	binary.BigEndian.PutUint64(buf[32:], g.n)
	g.n++
	h := sha256.Sum256(buf[:])
	out := make([]byte, 14)
	for i := range out {
		out[i] = base62[int(h[i])%62]
	}
	return string(out)
}

// id returns the next ascending id with prefix ("msg", "prt").
func (g *idGen) id(prefix string) string {
	v := g.next & (1<<48 - 1)
	g.next++
	return fmt.Sprintf("%s_%012x%s", prefix, v, g.tail())
}

// sessionID returns a descending session id for time at.
func (g *idGen) sessionID(at time.Time) string {
	v := ^(uint64(at.UnixMilli()) * 0x1000) & (1<<48 - 1)
	return fmt.Sprintf("ses_%012x%s", v, g.tail())
}
