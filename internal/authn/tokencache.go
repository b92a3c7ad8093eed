package authn

import (
	"sync"
	"time"
)

// tokenCache keeps credential records looked up by hash, so a call does not
// cost an etcd read to authenticate. It is only as good as the revocation
// watch that clears it: entries are served only while that watch runs
// (between its opened and closed), a deletion it sees drops the entry, a
// record read just before a deletion the watch already reported is not
// cached (the revoked set in openCalls remembers it), and neither is one
// read under an earlier watch (gen): a deletion between two watches goes
// unseen. tokenCacheTTL bounds an entry's age regardless.
type tokenCache struct {
	mu       sync.Mutex
	watching bool
	gen      uint64 // counts the watch's starts and ends
	entries  map[string]tokenEntry
	now      func() time.Time
}

type tokenEntry struct {
	rec Record
	at  time.Time
}

const (
	tokenCacheTTL  = 30 * time.Second
	tokenCacheSize = 10000 // past it the cache starts over: a bound, not an LRU
)

func newTokenCache() *tokenCache {
	return &tokenCache{entries: map[string]tokenEntry{}, now: time.Now}
}

// get returns hash's record if the cache holds a fresh one; else the
// generation and time to pass to put with the record read from etcd.
func (c *tokenCache) get(hash string) (rec Record, ok bool, gen uint64, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	e, ok := c.entries[hash]
	if !ok || !c.watching || now.Sub(e.at) > tokenCacheTTL {
		return Record{}, false, c.gen, now
	}
	return e.rec, true, c.gen, now
}

// put caches rec, read after get returned gen and at, unless the watch has
// not run all along since or revoked says the record was deleted since.
func (c *tokenCache) put(hash string, rec Record, gen uint64, at time.Time, revoked func(string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.watching || gen != c.gen || revoked(hash) {
		return
	}
	if len(c.entries) >= tokenCacheSize {
		clear(c.entries)
	}
	c.entries[hash] = tokenEntry{rec: rec, at: at}
}

// drop forgets hash (its record was deleted).
func (c *tokenCache) drop(hash string) {
	c.mu.Lock()
	delete(c.entries, hash)
	c.mu.Unlock()
}

// setWatching records whether the revocation watch runs; either way the
// cache starts empty (deletions while it was down went unseen).
func (c *tokenCache) setWatching(on bool) {
	c.mu.Lock()
	c.watching = on
	c.gen++
	clear(c.entries)
	c.mu.Unlock()
}
