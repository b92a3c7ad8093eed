package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/objstore/s3test"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// BenchmarkExportFromObjectStore exports a session whose history is all in
// segments on a real S3 server (another process), beside a raw read of
// the same segment objects from the same server in the same run, and
// reports the ratio of the two throughputs (the target: at least
// 0.5). It asserts nothing about time.
//
//	go test -run '^$' -bench ExportFromObjectStore -benchtime 3x ./internal/store
func BenchmarkExportFromObjectStore(b *testing.B) {
	ep := testharness.StartEtcd(b, nil)
	s := testharness.OpenStore(b, ep, nil)
	srv := s3test.Start(b)
	objs := srv.Open(b)
	tc := store.DefaultTierConfig()
	tc.HotMessages, tc.MinSegment, tc.SegmentMessages = 0, 1, 500
	if err := s.UseObjects(objs, tc, nil); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n1"}, "test", 30*time.Second); err != nil {
		b.Fatal(err)
	}
	c, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const total = 5000
	for i := 0; i < total; i += 50 {
		var batch []*castv1.Message
		for range 50 {
			batch = append(batch, &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: testharness.Words(rng, 8<<10)})
		}
		if _, err := s.Append(ctx, c.Session.Id, batch, fence.Guard{}); err != nil {
			b.Fatal(err)
		}
	}
	if n, err := s.Tier(ctx); err != nil || n != total {
		b.Fatalf("moved %d of %d: %v", n, total, err)
	}
	var keys []string
	if err := objs.List(ctx, "segments/", func(k string, _ time.Time) error { keys = append(keys, k); return nil }); err != nil {
		b.Fatal(err)
	}
	// The transcript's bytes as plain objects, one per segment: what a
	// raw read of the same history reads without compression.
	dec, err := zstd.NewReader(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer dec.Close()
	var plain []string
	for i, k := range keys {
		obj, err := objs.Get(ctx, k)
		if err != nil {
			b.Fatal(err)
		}
		body, err := dec.DecodeAll(obj, nil)
		if err != nil {
			b.Fatal(err)
		}
		plain = append(plain, fmt.Sprintf("plain/%d", i))
		if err := objs.Put(ctx, plain[i], body); err != nil {
			b.Fatal(err)
		}
	}
	readAll := func(keys []string) (int64, time.Duration) {
		t0, n := time.Now(), int64(0)
		for _, k := range keys {
			obj, err := objs.Get(ctx, k)
			if err != nil {
				b.Fatal(err)
			}
			n += int64(len(obj))
		}
		return n, time.Since(t0)
	}
	var raw, rawPlain, exp time.Duration
	var objBytes, plainBytes int64
	b.ResetTimer()
	for range b.N {
		n, d := readAll(keys)
		objBytes, raw = objBytes+n, raw+d
		n, d = readAll(plain)
		plainBytes, rawPlain = plainBytes+n, rawPlain+d
		t1 := time.Now()
		got := 0
		err := s.Export(ctx, c.Session.Id, func(_ *castv1.Session, msgs []*castv1.Message) error {
			got += len(msgs)
			return nil
		})
		if err != nil || got != total {
			b.Fatalf("export read %d of %d: %v", got, total, err)
		}
		exp += time.Since(t1)
	}
	// Throughputs in the transcript's bytes: export against a raw read of
	// them as plain objects (the target: at least 0.5), and
	// against a raw read of the compressed segments alone.
	b.ReportMetric(float64(plainBytes)/rawPlain.Seconds()/(1<<20), "raw_plain_MiB/s")
	b.ReportMetric(float64(plainBytes)/exp.Seconds()/(1<<20), "export_MiB/s")
	b.ReportMetric(rawPlain.Seconds()/exp.Seconds(), "export_vs_raw_plain")
	b.ReportMetric(raw.Seconds()/exp.Seconds(), "export_vs_raw_segments")
	b.ReportMetric(float64(plainBytes)/float64(objBytes), "compression")
}
