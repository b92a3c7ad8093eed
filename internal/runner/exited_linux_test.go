package runner

import (
	"os/exec"
	"testing"
	"time"
)

// exited tells a child that exited from one that runs, and leaves the
// exited one for cmd.Wait to reap with its status.
func TestExitedLeavesTheChildToWait(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read _; exit 3")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if exited(cmd.Process.Pid) {
		t.Fatal("a running child shows exited")
	}
	stdin.Close() // it exits
	for deadline := time.Now().Add(10 * time.Second); !exited(cmd.Process.Pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the child never showed exited")
		}
	}
	if err := cmd.Wait(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("cmd.Wait after exited: %v (state %v), want exit 3", err, cmd.ProcessState)
	}
	if !exited(cmd.Process.Pid) {
		t.Fatal("a reaped child does not show exited")
	}
}
