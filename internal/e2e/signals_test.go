package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/testharness"
)

// A second `controlplane --dev` on a data dir in use says which process
// holds it and exits non-zero at once (it used to wait on etcd's lock,
// deaf to signals); the first stops on SIGINT. The same for a second node
// on one data dir.
func TestSecondDaemonOnDataDirExits(t *testing.T) {
	t.Parallel()
	r := newDevRig(t)
	bins, dataDir, addr, c, first := r.bins, r.dataDir, r.addr, r.c, r.dev

	second := startDev(t, bins, dataDir, freeAddr(t))
	code, exited := second.Wait(15 * time.Second)
	if !exited || code == 0 {
		t.Fatalf("second dev on %s: exited %v code %d\n%s", dataDir, exited, code, second.Output())
	}
	if want := fmt.Sprintf("process %d holds", first.Cmd.Process.Pid); !strings.Contains(second.Output(), want) {
		t.Fatalf("second dev does not name the holder (%q):\n%s", want, second.Output())
	}

	nodeDir := t.TempDir()
	n1 := testharness.StartProc(t, filepath.Join(bins, "node"), "--controlplane", addr, "--data-dir", nodeDir, "--name", "n1", "--isolated-homes")
	c.waitNode("n1", true)
	n2 := testharness.StartProc(t, filepath.Join(bins, "node"), "--controlplane", addr, "--data-dir", nodeDir, "--name", "n2", "--isolated-homes")
	if code, exited := n2.Wait(15 * time.Second); !exited || code == 0 || !strings.Contains(n2.Output(), fmt.Sprintf("process %d holds", n1.Cmd.Process.Pid)) {
		t.Fatalf("second node on %s: exited %v code %d\n%s", nodeDir, exited, code, n2.Output())
	}

	for name, p := range map[string]*testharness.Proc{"node": n1, "dev": first} {
		p.Signal(syscall.SIGINT)
		if _, ok := p.Wait(20 * time.Second); !ok {
			t.Fatalf("%s did not stop on SIGINT", name)
		}
	}
}

// Every daemon stops promptly on SIGTERM or SIGINT in any state: a control
// plane still starting its embedded etcd, and a node that cannot reach its
// control plane.
func TestDaemonsStopOnSignalWhileStarting(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		dir := t.TempDir()
		cp := testharness.StartProc(t, filepath.Join(bins, "controlplane"), "--data-dir", dir, "--listen", freeAddr(t), "--metrics-listen", "")
		// The lock is taken (signals handled) just before etcd starts.
		testharness.WaitFor(t, 20*time.Second, "the data dir lock", func() bool {
			b, _ := os.ReadFile(filepath.Join(dir, "cast.lock"))
			return strings.TrimSpace(string(b)) == fmt.Sprint(cp.Cmd.Process.Pid)
		})
		cp.Signal(sig)
		if _, ok := cp.Wait(20 * time.Second); !ok {
			t.Fatalf("control plane ignored %v during start:\n%s", sig, cp.Output())
		}
		node := testharness.StartProc(t, filepath.Join(bins, "node"), "--controlplane", freeAddr(t), "--data-dir", t.TempDir(), "--name", "lonely", "--isolated-homes")
		testharness.WaitFor(t, 20*time.Second, "the node retries its dial", func() bool {
			// Before its first join (mTLS) it retries the join; after, the stream.
			out := node.Output()
			return strings.Contains(out, "control plane unreachable; retrying") || strings.Contains(out, "reconnecting")
		})
		node.Signal(sig)
		if _, ok := node.Wait(10 * time.Second); !ok {
			t.Fatalf("unconnected node ignored %v:\n%s", sig, node.Output())
		}
	}
}

// `controlplane --dev` runs its node as a child process of the node
// binary; killed alone (kill -9 of its pid, not its process group), it
// leaves no node behind: the node's stdin, a pipe from the control plane,
// closes and the node stops, letting go of its data dir.
func TestDevNodeStopsWhenItsControlPlaneIsKilled(t *testing.T) {
	t.Parallel()
	r := newDevRig(t)
	dataDir, dev := r.dataDir, r.dev
	if !strings.Contains(dev.Output(), "dev node started") {
		t.Fatalf("no dev node child started:\n%s", dev.Output())
	}
	nodeDir := filepath.Join(dataDir, "node")
	if _, err := fsutil.LockDir(nodeDir); !errors.Is(err, fsutil.ErrLocked) {
		t.Fatalf("the dev node's data dir is not held by a node process: %v", err)
	}
	if err := syscall.Kill(dev.Cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testharness.WaitFor(t, 30*time.Second, "the dev node lets go of its data dir", func() bool {
		l, err := fsutil.LockDir(nodeDir)
		l.Unlock()
		return err == nil
	})
	// Its output is read to the end once every writer (the node too) has
	// closed the pipe.
	if _, ok := dev.Wait(30 * time.Second); !ok {
		t.Fatal("the dev process's output stays open: a process still holds it")
	}
	if !strings.Contains(dev.Output(), "stdin closed") {
		t.Errorf("the dev node did not say why it stopped:\n%s", dev.Output())
	}
}
