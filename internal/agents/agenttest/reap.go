package agenttest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/shirou/gopsutil/v4/process"
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
	dir = filepath.Clean(dir)
	prefix := dir + string(filepath.Separator)
	reap(func(h string) bool { return h == dir || strings.HasPrefix(h, prefix) })
}

// reap kills every process whose HOME matches and waits for them to go.
// The processes are listed through gopsutil, as the node's orphan
// search lists them (internal/node/orphans.go).
func reap(match func(home string) bool) {
	procs, _ := process.Processes()
	var killed []*process.Process
	for _, p := range procs {
		if int(p.Pid) == os.Getpid() {
			continue
		}
		env, err := p.Environ()
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, kv := range env {
			if h, ok := strings.CutPrefix(kv, "HOME="); ok && match(h) {
				if p.Kill() == nil {
					killed = append(killed, p)
				}
				break
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range killed {
		for alive(p) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// alive reports whether p is still running (not a zombie waiting for a
// parent that is not this process).
func alive(p *process.Process) bool {
	st, err := p.Status()
	return err == nil && !slices.Contains(st, process.Zombie)
}
