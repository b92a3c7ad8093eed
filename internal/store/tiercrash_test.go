package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/failpoint"
	"github.com/cast-dev/cast/internal/objstore"
	"github.com/cast-dev/cast/internal/objstore/s3test"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// moverEnv carries a mover's config to the test binary run as one.
const moverEnv = "CAST_TEST_TIER_MOVER"

// moverConfig is what a mover process moves with.
type moverConfig struct {
	Etcd  string
	S3    objstore.S3Config
	Pause string // a point where it stops until Fifo is opened and closed
	Fifo  string
}

// runMoverIfAsked makes the test binary a process that runs one tiering
// round (store.Tier) against etcd and an S3 server, dies at the points
// CAST_FAILPOINTS names, and exits 0 when the round moved without error.
func runMoverIfAsked() {
	raw := os.Getenv(moverEnv)
	if raw == "" {
		return
	}
	var c moverConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintln(os.Stderr, "mover config:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := store.DefaultConfig()
	smallChunks(&cfg)
	s, err := store.Open(ctx, []string{c.Etcd}, store.Access{}, cfg, nil, zap.NewNop())
	if err != nil {
		fmt.Fprintln(os.Stderr, "mover store:", err)
		os.Exit(2)
	}
	objs, err := objstore.NewS3(ctx, c.S3)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mover s3:", err)
		os.Exit(2)
	}
	kill := failpoint.FromEnv(zap.NewNop())
	paused := false
	hook := func(name string) {
		if kill != nil {
			kill(name)
		}
		if name == c.Pause && !paused {
			paused = true
			fmt.Println("paused at " + name)
			if f, err := os.Open(c.Fifo); err == nil { // blocks until the test opens it to write
				_, _ = io.Copy(io.Discard, f)
				f.Close()
			}
		}
	}
	if err := s.UseObjects(objs, tierTestConfig(), hook); err != nil {
		fmt.Fprintln(os.Stderr, "mover:", err)
		os.Exit(2)
	}
	n, err := s.Tier(ctx)
	fmt.Printf("moved %d messages: %v\n", n, err)
	if err != nil {
		os.Exit(3)
	}
	os.Exit(0)
}

// startMover runs a mover process.
func startMover(t *testing.T, c moverConfig, failpoints string) *testharness.Proc {
	raw, _ := json.Marshal(c)
	env := []string{moverEnv + "=" + string(raw)}
	if failpoints != "" {
		env = append(env, failpoint.EnvVar+"="+failpoints)
	}
	return testharness.StartProcEnv(t, env, os.Args[0], "-test.run=^$")
}

// waitExit waits for a process's own exit and returns its code (-1: killed).
func waitExit(t *testing.T, p *testharness.Proc) int {
	t.Helper()
	code, ok := p.Wait(60 * time.Second)
	if !ok {
		t.Fatalf("process did not exit:\n%s", p.Output())
	}
	return code
}

// waitOutput waits (bounded) until a process printed want.
func waitOutput(t *testing.T, p *testharness.Proc, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.Output(), want) {
		if _, exited := p.Wait(20 * time.Millisecond); exited || time.Now().After(deadline) {
			t.Fatalf("process never printed %q (exited %v):\n%s", want, exited, p.Output())
		}
	}
}

// TestTierCrashAtEachStep kills -9, at each step of a move, either the
// process moving history or the S3 server, and checks that the transcript
// stays whole (every message once, in order) through the crash, a later
// mover that finishes the job, and the orphan sweep, which deletes exactly
// the segments the crash left unreferenced.
func TestTierCrashAtEachStep(t *testing.T) {
	etcd := testharness.StartEtcd(t, nil)
	srv := s3test.Start(t)
	s := testharness.OpenStore(t, etcd, smallChunks)
	if err := s.UseObjects(srv.Open(t), tierTestConfig(), nil); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		point   string
		killS3  bool // else the mover is killed
		orphans int  // segments the crash leaves that no index entry points at
		exit    int  // the crashed mover's exit code
	}{
		{store.FailBeforeSegmentWrite, false, 0, -1},
		{store.FailAfterSegmentWrite, false, 1, -1},
		{store.FailAfterVerify, false, 1, -1},
		{store.FailAfterMoveTxn, false, 0, -1},
		{store.FailBeforeSegmentWrite, true, 0, 3}, // the write fails
		{store.FailAfterSegmentWrite, true, 1, 3},  // written, the read back fails
		{store.FailAfterVerify, true, 0, 3},        // the txn commits (etcd only); the next write fails
		{store.FailAfterMoveTxn, true, 0, 3},
	} {
		who := "mover"
		if tc.killS3 {
			who = "s3"
		}
		t.Run(tc.point+"/kill-"+who, func(t *testing.T) {
			c := newSession(t, s, fmt.Sprintf("n%d", i))
			id := c.Session.Id
			// 120 messages: one run of 70 past the hot tail, then the
			// hot tail's large parts, each a segment of its own (so a
			// move after the crashed one's txn writes again).
			want := appendN(t, s, id, 120, fmt.Sprint(i))
			mc := moverConfig{Etcd: etcd, S3: srv.Config()}
			if tc.killS3 {
				mc.Pause, mc.Fifo = tc.point, filepath.Join(t.TempDir(), "fifo")
				if err := syscall.Mkfifo(mc.Fifo, 0o600); err != nil {
					t.Fatal(err)
				}
				p := startMover(t, mc, "")
				waitOutput(t, p, "paused at "+tc.point)
				srv.Kill()
				release(t, mc.Fifo)
				if code := waitExit(t, p); code != tc.exit {
					t.Fatalf("mover exit %d, want %d:\n%s", code, tc.exit, p.Output())
				}
			} else {
				p := startMover(t, mc, tc.point)
				if code := waitExit(t, p); code != tc.exit {
					t.Fatalf("mover exit %d, want %d:\n%s", code, tc.exit, p.Output())
				}
				srv.Kill() // and the server dies too: what it acknowledged must last
			}
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			checkWhole(t, s, id, want)

			mc.Pause = ""
			if p := startMover(t, mc, ""); waitExit(t, p) != 0 {
				t.Fatalf("clean mover failed:\n%s", p.Output())
			}
			checkWhole(t, s, id, want)
			if n, err := s.SweepSegments(ctxT(t), time.Now().Add(time.Minute)); err != nil || n != tc.orphans {
				t.Fatalf("sweep deleted %d segments (%v), want %d", n, err, tc.orphans)
			}
			checkWhole(t, s, id, want)
			want = append(want, appendN(t, s, id, 20, "after")...)
			checkWhole(t, s, id, want)
		})
	}
}

// release lets a paused mover go on.
func release(t *testing.T, fifo string) {
	t.Helper()
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
