package faults_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/faults"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// smallDisk mounts a tmpfs of size bytes at a new directory for the test
// (a real filesystem that runs out of space, so writes fail with ENOSPC
// where the kernel says so, not where a test double would).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size="+size+",mode=0700"); err != nil {
		if errors.Is(err, syscall.EPERM) {
			// Mounting needs root (CAP_SYS_ADMIN); CI runs as root.
			t.Skipf("mounting a tmpfs needs root: %v", err)
		}
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a ballast file into dir until the filesystem is full and
// returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "ballast")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4<<10)
	for range 1 << 16 { // bounded: 256 MiB, far past any small disk
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return p
			}
			t.Fatal(err)
		}
	}
	t.Fatal("the small disk never filled up")
	return ""
}

// The node's data dir runs out of space while messages arrive: its state
// file is never torn, no acknowledged message is lost or run twice, and
// once space returns the node catches up by itself; after a restart it
// neither forgets nor repeats anything.
func TestNodeStateDirFullLosesNothing(t *testing.T) {
	disk := smallDisk(t, "2m")
	fake := fakemodel.Start(t)
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	claude := withClaude(t, fake) // one agent home across the restart
	dataDir, stop := startNode(t, srv.Addr(), "n1", filepath.Join(disk, "node"), claude)
	waitConnected(t, c, "n1", 30*time.Second)
	tr := &turns{c: c, sess: newSessions(t, c, "n1", "claude", t.TempDir(), 1)[0]}
	tr.send(t)
	tr.waitAnswered(t, 2*time.Minute, "the first answer")

	for cycle := range scale(1, 3) {
		ballast := fill(t, disk)
		// Messages go on until one cannot be recorded and the session says
		// so: the node's state journal appends a few hundred bytes a
		// change, which may still fit in a page the disk had begun, so the
		// first messages on a full disk may run to the end.
		shown := false
		for i := 0; i < 12 && !shown; i++ {
			tr.send(t) // acknowledged, whether or not the node can record it
			last := tr.acks[len(tr.acks)-1].Seq
			testharness.WaitFor(t, 2*time.Minute, "the message answered or the full disk shown", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				s, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: tr.sess})
				if err != nil {
					return false
				}
				shown = s.State == castv1.SessionState_SESSION_STATE_FAILED && strings.Contains(s.StateReason, "no space left on device")
				return shown || (s.State == castv1.SessionState_SESSION_STATE_IDLE && s.DeliveredSeq >= last)
			})
		}
		if !shown {
			t.Fatalf("cycle %d: 12 messages on a full disk, and the session never showed that the node cannot record them", cycle)
		}
		before := readState(t, dataDir) // intact, though writes fail
		if got := before.Sessions[tr.sess].DeliveredSeq; got >= tr.acks[len(tr.acks)-1].Seq {
			t.Fatalf("cycle %d: delivered seq %d recorded on a full disk", cycle, got)
		}
		if err := os.Remove(ballast); err != nil {
			t.Fatal(err)
		}
		tr.waitAnswered(t, 2*time.Minute, "answers once space returned")
		st := readState(t, dataDir)
		if got, want := st.Sessions[tr.sess].DeliveredSeq, tr.acks[len(tr.acks)-1].Seq; got < want {
			t.Fatalf("cycle %d: state.json has delivered seq %d, want %d", cycle, got, want)
		}
	}

	// A restart reads what was recorded: nothing is run again.
	stop()
	startNode(t, srv.Addr(), "n1", dataDir, claude)
	waitConnected(t, c, "n1", 30*time.Second)
	tr.send(t)
	tr.waitAnswered(t, 2*time.Minute, "an answer after the restart")

	ck := faults.Checker{Sessions: c.Sessions, Claims: claims(map[string]string{"n1": dataDir})}
	tr.checkAnswered(t, ck)
	check(t, ck, "ENOSPC on the node's state dir", tr.acks)
}
