package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// A watch that etcd refuses because the token of clientv3's shared watch
// stream lapsed (a long-lived watch keeps that stream open) re-opens on a
// new stream from the revision it asked for: the puts before it opened
// and after come through once each, in order. A compaction above that
// revision still ends the watch with ErrCompacted.
func TestFollowOutlivesItsStreamsToken(t *testing.T) {
	const ttl = 2
	e, access := testharness.StartTokenTTLEtcd(t, ttl)
	s, err := openWith(t, e.URL, access)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	put := func(key, val string) int64 {
		t.Helper()
		rev, err := store.Put(ctx, s, key, val)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	// The long-lived watch that holds the first stream open.
	held, release := context.WithCancel(ctx)
	defer release()
	heldDone, heldOpen := make(chan error, 1), make(chan struct{})
	hrev := put("held", "x")
	go func() {
		heldDone <- store.Follow(held, s, "held", hrev, func(string) bool {
			select {
			case <-heldOpen:
			default:
				close(heldOpen)
			}
			return true
		})
	}()
	<-heldOpen

	from := put("k", "a")
	put("k", "b")
	// The idle spell is what the test is about: the stream's token has to
	// lapse on etcd's clock.
	time.Sleep((ttl + 2) * time.Second)
	var got []string
	err = store.Follow(ctx, s, "k", from, func(v string) bool {
		got = append(got, v)
		if v == "b" {
			put("k", "c")
		}
		return v != "c"
	})
	if err != nil || strings.Join(got, " ") != "a b c" {
		t.Fatalf("watch from rev %d after the token lapsed: got %q, %v; want a b c", from, got, err)
	}

	if _, err := e.RootClient(t).Compact(ctx, put("k", "d")); err != nil {
		t.Fatal(err)
	}
	if err := store.Follow(ctx, s, "k", from, func(string) bool { return true }); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("watch from compacted rev %d: %v, want %v", from, err, rpctypes.ErrCompacted)
	}
	release()
	if err := <-heldDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("held watch ended with %v", err)
	}
}
