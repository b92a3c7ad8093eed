package repair

import (
	"crypto/sha1"
	"fmt"
)

// StableUUID derives a version-5-style UUID from seed, so rewriting the same
// cast session gives the same native ids.
func StableUUID(seed string) string {
	h := sha1.Sum([]byte("cast:" + seed))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
