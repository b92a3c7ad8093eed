package authn

import (
	"testing"
	"time"
)

func TestTokenCache(t *testing.T) {
	rec := Record{Role: "user", Name: "ana"}
	never := func(string) bool { return false }
	cases := []struct {
		name string
		run  func(c *tokenCache, clock *time.Time) bool // whether "h" is served afterwards
	}{
		{"cached while the watch runs", func(c *tokenCache, _ *time.Time) bool {
			watchAndCache(c)
			return true
		}},
		{"not cached before the watch opened", func(c *tokenCache, _ *time.Time) bool {
			_, _, gen, at := c.get("h")
			c.put("h", rec, gen, at, never)
			c.setWatching(true)
			return false
		}},
		{"read under an earlier watch: a deletion between the two went unseen", func(c *tokenCache, _ *time.Time) bool {
			c.setWatching(true)
			_, _, gen, at := c.get("h")
			c.setWatching(false)
			c.setWatching(true)
			c.put("h", rec, gen, at, never)
			return false
		}},
		{"deletion seen while the record was read", func(c *tokenCache, _ *time.Time) bool {
			c.setWatching(true)
			_, _, gen, at := c.get("h")
			c.put("h", rec, gen, at, func(h string) bool { return h == "h" })
			return false
		}},
		{"deletion seen after it was cached", func(c *tokenCache, _ *time.Time) bool {
			watchAndCache(c)
			c.drop("h")
			return false
		}},
		{"the watch ended", func(c *tokenCache, _ *time.Time) bool {
			watchAndCache(c)
			c.setWatching(false)
			return false
		}},
		{"older than the TTL", func(c *tokenCache, clock *time.Time) bool {
			watchAndCache(c)
			*clock = clock.Add(tokenCacheTTL + time.Second)
			return false
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := time.Unix(1000, 0)
			c := newTokenCache()
			c.now = func() time.Time { return clock }
			want := tc.run(c, &clock)
			got, ok, _, _ := c.get("h")
			if ok != want || (ok && got != rec) {
				t.Fatalf("served %v (%+v), want %v", ok, got, want)
			}
		})
	}
}

// watchAndCache opens the watch and caches "h" as a look-up would.
func watchAndCache(c *tokenCache) {
	c.setWatching(true)
	_, _, gen, at := c.get("h")
	c.put("h", Record{Role: "user", Name: "ana"}, gen, at, func(string) bool { return false })
}
