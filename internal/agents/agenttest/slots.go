package agenttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// SlotsEnv sets how many real CLIs Run starts at once on this machine
// (SlotsOff: no bound). The default is the number of cores.
const SlotsEnv = "CAST_CLI_SLOTS"

// SlotsOff in SlotsEnv lets every Run start at once.
const SlotsOff = "0"

// slotWait bounds how long a run waits for a slot before it starts anyway:
// a CLI held at the fake model keeps its slot while it idles, and a slower
// test is better than one stuck behind another test's hold.
const slotWait = 45 * time.Second

// slotWaitFor is how long a run whose context ends at a deadline waits
// for a slot: a quarter of the time left at most, so the wait takes no
// more than that from the CLI's own time.
func slotWaitFor(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return slotWait
	}
	return min(slotWait, time.Until(d)/4)
}

// slotPoll is how often a waiting run tries the slots again. flock has no
// timed wait, and a blocked flock cannot be called off.
const slotPoll = 50 * time.Millisecond

// The CLIs are CPU-bound while they start (OpenCode spends ~3 CPU-s before
// its first request), the test packages run side by side, and running more
// CLIs than the machine has cores costs CPU for no earlier finish: four
// OpenCode runs at once cost 43% more CPU each than one at a time, and
// ended later than the four in a row (2 cores, 2026-12-04). So Run takes
// one of a few slots first. A slot is a lock file in the temporary folder
// every test process shares, so the bound holds across packages, and the
// kernel drops a dead process's slot.

// slotCount is the bound Run keeps to: SlotsEnv, else the cores.
func slotCount() (int, error) {
	v := os.Getenv(SlotsEnv)
	if v == "" {
		return runtime.NumCPU(), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: want a count of CLIs (%s: no bound)", SlotsEnv, v, SlotsOff)
	}
	return n, nil
}

// takeSlot waits for one of n slots in dir, at most wait (or until ctx
// ends), and returns its release and whether it got one: when n is 0 or
// the wait ran out the release is a no-op, and the run goes on either way.
func takeSlot(ctx context.Context, dir string, n int, wait time.Duration) (release func(), got bool, err error) {
	none := func() {}
	if n == 0 {
		return none, false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return none, false, err
	}
	files := make([]*os.File, n)
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i := range files {
		f, err := os.OpenFile(filepath.Join(dir, "slot-"+strconv.Itoa(i)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return none, false, err
		}
		files[i] = f
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(slotPoll)
	defer tick.Stop()
	for {
		for i, f := range files {
			err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				files[i] = nil // kept open: closing it gives the slot back
				return func() { f.Close() }, true, nil
			}
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				return none, false, err
			}
		}
		slotsAllHeld()
		select {
		case <-tick.C:
		case <-deadline.C:
			return none, false, nil
		case <-ctx.Done():
			return none, false, nil
		}
	}
}

// slotsAllHeld is called each time a waiting run found every slot held
// (a test's hook).
var slotsAllHeld = func() {}

// slotDir is where the slots' lock files are: one folder for every test
// process of the user on this machine.
func slotDir() string {
	return filepath.Join(os.TempDir(), "cast-cli-slots-"+strconv.Itoa(os.Getuid()))
}
