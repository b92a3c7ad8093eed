package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/testharness"
)

// A control plane logging for people into a pipe writes no colour escapes,
// and a clean SIGTERM logs no ERROR line (embedded etcd once logged four,
// one per listener it closed).
func TestControlPlaneLogsPlainAndQuietOnStop(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	cp := testharness.StartProc(t, filepath.Join(bins, "controlplane"), "--data-dir", t.TempDir(),
		"--listen", freeAddr(t), "--metrics-listen", "", "--log-format", "console")
	testharness.WaitFor(t, 60*time.Second, "the control plane serving", func() bool {
		return strings.Contains(cp.Output(), "control plane serving")
	})
	if !cp.Stop(30 * time.Second) {
		t.Fatalf("control plane did not stop on SIGTERM")
	}
	out := cp.Output()
	if strings.Contains(out, "\x1b[") {
		t.Errorf("console logs into a pipe carry colour escapes:\n%q", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "\tERROR\t") {
			t.Errorf("a clean stop logged an error: %s", line)
		}
	}
	if !strings.Contains(out, "shutting down") {
		t.Errorf("no shutdown line; did it stop cleanly?\n%s", out)
	}
}
