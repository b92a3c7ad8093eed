package store

import (
	"fmt"
	"time"
)

// TierConfig is the tiering policy: which history leaves etcd for the
// object store (tier.go).
type TierConfig struct {
	// HotMessages is the tail of each session kept in etcd; older
	// messages move once at least MinSegment of them are waiting.
	HotMessages int64
	MinSegment  int64
	// IdleAge: a session whose last seq has not moved for this long (by
	// this replica's clock) moves whole, hot tail included.
	IdleAge time.Duration
	// PartBytes: a message at least this large (an image, a big tool
	// output) moves as soon as PartTail newer messages follow it, hot tail
	// or not. Only chunked messages can be that large, so it is at least
	// the store's ChunkBytes.
	PartBytes int
	PartTail  int64
	// A segment holds at most SegmentMessages messages and about
	// SegmentBytes bytes of them before compression.
	SegmentMessages int
	SegmentBytes    int
	// Every is how often a replica looks for history to move and sweeps
	// orphan segments; OrphanGrace is how old an unreferenced segment must
	// be before the sweep deletes it (a move abandons a segment it wrote
	// more than half of it ago, so the two never race).
	Every       time.Duration
	OrphanGrace time.Duration
	// DedupeWindow is how long a moved message's client id record stays
	// in etcd: a retry within it is answered with the stored message, one
	// after it is a new message. Past it the record leaves etcd, so etcd
	// keeps nothing per message of moved history (tiercids.go).
	DedupeWindow time.Duration
}

// DefaultTierConfig returns the defaults.
func DefaultTierConfig() TierConfig {
	return TierConfig{
		HotMessages:     1000,
		MinSegment:      200,
		IdleAge:         24 * time.Hour,
		PartBytes:       DefaultChunkBytes,
		PartTail:        20,
		SegmentMessages: 2000,
		SegmentBytes:    8 << 20,
		Every:           time.Minute,
		OrphanGrace:     time.Hour,
		DedupeWindow:    7 * 24 * time.Hour,
	}
}

// Validate checks c against the store's config sc.
func (c TierConfig) Validate(sc Config) error {
	switch {
	case c.HotMessages < 0 || c.PartTail < 0:
		return fmt.Errorf("store: tier hot tail and part tail must not be negative")
	case c.MinSegment < 1:
		return fmt.Errorf("store: tier min segment must be at least 1")
	case c.IdleAge < time.Minute:
		return fmt.Errorf("store: tier idle age must be at least a minute")
	case c.PartBytes < sc.ChunkBytes:
		return fmt.Errorf("store: tier part bytes below the chunk size (%d)", sc.ChunkBytes)
	case c.SegmentMessages < 1 || c.SegmentMessages > 100000:
		return fmt.Errorf("store: tier segment messages must be in [1,100000]")
	case c.SegmentBytes < sc.ChunkBytes || c.SegmentBytes > 256<<20:
		return fmt.Errorf("store: tier segment bytes must be in [chunk size,256MiB]")
	case c.Every <= 0:
		return fmt.Errorf("store: tier interval must be positive")
	case c.OrphanGrace < 2*time.Second:
		return fmt.Errorf("store: tier orphan grace must be at least 2s")
	case c.DedupeWindow < time.Minute:
		return fmt.Errorf("store: tier dedupe window must be at least a minute (retries within it are recognised)")
	}
	return nil
}
