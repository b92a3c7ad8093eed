package testharness

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// ResetPeakRSS returns the Go heap's free pages to the OS and starts the
// process's peak resident set size afresh (Linux: /proc/self/clear_refs;
// elsewhere PeakMemory reports the peak since the process started), so
// what a test did before is not the peak of what it does next.
func ResetPeakRSS() {
	debug.FreeOSMemory() // a GC first
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// PeakMemory says how much memory the process has used: its peak resident
// set size since ResetPeakRSS (Linux's VmHWM) and the Go heap's size as
// the runtime holds it from the OS now.
func PeakMemory() string {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap := fmt.Sprintf("Go heap obtained from the OS %d MiB (%d MiB in use now)", ms.HeapSys>>20, ms.HeapInuse>>20)
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "resident peak unknown here; " + heap
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return "resident peak " + strings.TrimSpace(v) + "; " + heap
		}
	}
	return "resident peak unknown here; " + heap
}
