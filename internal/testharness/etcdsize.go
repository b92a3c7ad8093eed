package testharness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/store"
)

// What the history-beyond-etcd tests measure of etcd (TestTierKeepsEtcdFlat,
// TestAdoptedHistoryBeyondEtcd), and the text they fill it with.

// EtcdSize is etcd's file size and the bytes in use in it.
func EtcdSize(t testing.TB, cli *clientv3.Client) (file, inUse int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, cli.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	return st.DbSize, st.DbSizeInUse
}

// KeptBesideMessages is the bytes of the keys and values etcd holds
// beside the message envelopes (msgs/): what must stay flat while the
// history moves out. bbolt's pages in use are not the measure: they move
// by hundreds of KiB with pages a compaction has not freed yet.
func KeptBesideMessages(t testing.TB, cli *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, kv := range resp.Kvs {
		if !strings.HasPrefix(string(kv.Key), store.DefaultPrefix+"msgs/") {
			n += int64(len(kv.Key) + len(kv.Value))
		}
	}
	return n
}

// CountKeys counts the keys under the store's prefix p.
func CountKeys(t testing.TB, cli *clientv3.Client, p string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, store.DefaultPrefix+p, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// TierRound is one round of a replica's tiering by its clock at, then a
// physical compaction of etcd, as its auto-compaction does; it returns
// etcd's file size after.
func TierRound(t testing.TB, s *store.Store, cli *clientv3.Client, at time.Time) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := s.TierAt(ctx, at); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, store.DefaultPrefix+"health", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	file, _ := EtcdSize(t, cli)
	return file
}

// Words is about size bytes of text from a small vocabulary: it
// compresses about as well as a transcript does.
func Words(rng *rand.Rand, size int) string {
	vocab := strings.Fields("the a func return err nil if for range store etcd segment message session node agent tool call result file line test build go cast move read write index digest")
	var b strings.Builder
	for b.Len() < size {
		b.WriteString(vocab[rng.IntN(len(vocab))])
		b.WriteByte(' ')
		if rng.IntN(12) == 0 {
			fmt.Fprintf(&b, "%x\n", rng.Uint64())
		}
	}
	return b.String()
}

// textPool is 4 MiB of Words, made once when a test asks.
var textPool = sync.OnceValue(func() string { return Words(rand.New(rand.NewPCG(5, 6)), 4<<20) })

// Pooled is size bytes of Words at a random offset of a pool made once:
// cheap, so a test's time goes to what it measures, and it shares the
// pool's memory (a test holding 400 MB of messages holds 4 MiB of text).
func Pooled(rng *rand.Rand, size int) string {
	pool := textPool()
	at := rng.IntN(len(pool) - size)
	return pool[at : at+size]
}
