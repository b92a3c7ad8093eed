package agenttest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// reapHome kills every process whose environment names home as HOME.
// Some CLIs start helpers that leave the terminal's process group (the
// Codex picker starts a managed app-server daemon in its own session), so
// killing the group alone left them running after the test, inside a
// scratch HOME the test was removing. Every process a test starts gets
// its scratch HOME, so HOME is what marks them as the test's.
func reapHome(home string) {
	if home == "" {
		return
	}
	reap(func(h string) bool { return h == home })
}

// ReapUnder kills every process whose HOME is dir or a folder below it:
// what a test's daemons started and left behind, such as a CLI a node
// ran in a process group of its own and that outlived the node's kill,
// still writing into the test's folders while they are removed.
func ReapUnder(dir string) {
	if dir == "" {
		return
	}
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	reap(func(h string) bool { return h == filepath.Clean(dir) || strings.HasPrefix(h, prefix) })
}

// reap kills every process whose HOME matches and waits for them to go.
func reap(match func(home string) bool) {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if h, ok := bytes.CutPrefix(kv, []byte("HOME=")); ok && match(string(h)) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					pids = append(pids, pid)
				}
				break
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil && alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// alive reports whether pid is still running (not a zombie waiting for a
// parent that is not this process).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command name's closing parenthesis.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
