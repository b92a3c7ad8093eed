package agenttest

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/shirou/gopsutil/v4/process"
)

// ReapUnder kills the processes whose HOME is the folder or below it and
// leaves one whose HOME only shares the folder's name as a prefix.
func TestReapUnder(t *testing.T) {
	root := t.TempDir()
	start := func(home string) (int32, <-chan struct{}) {
		cmd := exec.Command("sleep", "60")
		cmd.Env = []string{"HOME=" + home}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
		return int32(cmd.Process.Pid), done
	}
	_, inDone := start(root)
	_, belowDone := start(filepath.Join(root, "a", "b"))
	beside, _ := start(root + "-beside")
	ReapUnder(root)
	for name, done := range map[string]<-chan struct{}{"HOME the folder": inDone, "HOME below it": belowDone} {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s: still running after ReapUnder", name)
		}
	}
	// ReapUnder waits for what it killed to stop running, so one still
	// running now was left alone.
	p, err := process.NewProcess(beside)
	if err != nil || !alive(p) {
		t.Errorf("HOME beside the folder: killed (%v)", err)
	}
}
