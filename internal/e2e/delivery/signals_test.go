package delivery

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cast-dev/cast/internal/deliverycheck"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// killCLI signals the process group of a session's running agent CLI
// from outside the node (the OOM killer's kill -9, a user's kill or
// SIGTERM): the session drawn by k, or else the next one with a CLI
// running; with none, the step does nothing. The node holds the killed
// turn's message and runs it with the session's next message, or at its
// own next start: the checker's carried property.
func (r *rig) killCLI(k uint64, term bool) {
	r.t.Helper()
	r.waitHold(r.sessions[k%uint64(len(r.sessions))]) // mid-turn, as an interrupt lands
	var s *session
	cli := 0
	for i := range r.sessions {
		c := r.sessions[(k+uint64(i))%uint64(len(r.sessions))]
		if pid := r.cliOf(c); pid > 0 {
			s, cli = c, pid
			break
		}
	}
	if s == nil {
		r.happened["cli-kill: no CLI running"]++
		r.rec.logf("  no agent CLI runs: nothing to kill")
		return
	}
	sig, name := syscall.SIGKILL, "kill -9"
	if term {
		sig, name = syscall.SIGTERM, "SIGTERM"
	}
	start := r.rec.tick()
	pgid, err := syscall.Getpgid(cli)
	if err != nil {
		r.happened["cli-kill: no CLI running"]++
		r.rec.logf("  %s's CLI (pid %d) ended before the signal", s.tag, cli)
		return
	}
	_ = syscall.Kill(-pgid, sig)
	r.rec.logf("  %s to %s's %s CLI (process group %d)", name, s.tag, s.agent, pgid)
	if !gone(cli, time.Minute) {
		// A CLI may catch SIGTERM and go on; the kill -9 a service manager
		// sends after its stop timeout ends it.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		r.rec.logf("  %s's CLI outlived %s for a minute: kill -9", s.tag, name)
		if !gone(cli, time.Minute) {
			r.fatalf("%s's CLI (pid %d) did not end within a minute of kill -9", s.tag, cli)
		}
	}
	r.happened["cli-kill "+name]++
	r.rec.update(func(h *deliverycheck.History) {
		h.Faults = append(h.Faults, deliverycheck.Fault{Start: start, End: r.rec.tick(), What: name + " to " + s.tag + "'s CLI", Session: s.tag})
	})
}

// stopService is a service manager's stop of the node of the session
// drawn by k (systemd's KillMode=control-group, launchd): SIGTERM to the
// node and to every process it started, at once, then a start on the
// same data dir. With cliFirst the CLIs get theirs first and the node
// once they ended (their exits reaped by the node before its own signal,
// the order in which a held turn used to stay held after the start).
// With nothing sent, each session on it must then get every message sent
// before the stop: the checker's resumed property reads what the store
// says once they settle.
func (r *rig) stopService(k uint64, cliFirst bool) {
	r.t.Helper()
	drawn := r.sessions[k%uint64(len(r.sessions))]
	r.waitHold(drawn) // mid-turn, as an interrupt lands
	n, other := r.nodes[0], r.nodes[1]
	if r.get(drawn).Node == r.nodes[1].Name {
		n, other = other, n
	}
	if len(descendants(n.Proc.Cmd.Process.Pid)) == 0 && len(descendants(other.Proc.Cmd.Process.Pid)) > 0 {
		n = other // a stop that cuts a turn, when one runs
	}
	var mine []*session // steps run one at a time: none moves during this one
	for _, s := range r.sessions {
		if r.get(s).Node == n.Name {
			mine = append(mine, s)
		}
	}
	start := r.rec.tick()
	r.terminate(n, cliFirst)
	if _, ok := n.Proc.Wait(2 * time.Minute); !ok {
		r.fatalf("%s did not stop within 2 minutes of SIGTERM", n.Name)
	}
	r.keepLog(n.Name, n.Proc)
	// The requests the stopped CLIs left at the model are answered to no
	// one; the runs the restarted node starts must not be held.
	for _, s := range mine {
		r.rec.free(s.tag)
	}
	n.Start(r.c)
	r.rec.update(func(h *deliverycheck.History) {
		h.Faults = append(h.Faults, deliverycheck.Fault{Start: start, End: r.rec.tick(), What: "service stop of " + n.Name})
	})
	r.happened["service-stop"]++
	r.rec.logf("  %s is back", n.Name)
	deadline := time.Now().Add(settleWithin)
	for _, s := range mine {
		got := r.awaitDelivered(s, deadline)
		r.rec.update(func(h *deliverycheck.History) {
			h.Resumes = append(h.Resumes, deliverycheck.Resume{Session: s.tag, From: start, At: r.rec.tick(), Delivered: got.DeliveredSeq})
		})
		r.rec.logf("  %s after the stop, nothing sent: %v, delivered seq %d of %d", s.tag, got.State, got.DeliveredSeq, s.lastSeq)
	}
}

// terminate sends SIGTERM to node n and every process below it, in
// systemd's order (the node, then the rest, with nothing in between) or
// with cliFirst the rest first and the node once it reaped its own.
func (r *rig) terminate(n *testharness.NodeProc, cliFirst bool) {
	node := n.Proc.Cmd.Process.Pid
	group := descendants(node)
	term := func() {
		for _, pid := range group {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	if cliFirst {
		parents := procParents()
		term()
		for _, pid := range group {
			// The node's own children until it reaped them: it saw their
			// exits before its signal.
			if !exited(pid, parents[pid] != node, time.Minute) {
				r.rec.logf("  %s's process %d outlived SIGTERM for a minute", n.Name, pid)
			}
		}
		_ = syscall.Kill(node, syscall.SIGTERM)
	} else {
		// As systemd does: the main process, then the rest of the
		// service's processes, with nothing in between.
		_ = syscall.Kill(node, syscall.SIGTERM)
		term()
	}
	r.rec.logf("  SIGTERM to %s and its %d processes (theirs first: %v)", n.Name, len(group), cliFirst)
}

// awaitDelivered waits until the store says s's agent got every message
// sent to it, or the deadline passed, and returns what it said last.
func (r *rig) awaitDelivered(s *session, deadline time.Time) *castv1.Session {
	r.t.Helper()
	for {
		got := r.get(s)
		if got.DeliveredSeq >= s.lastSeq || time.Now().After(deadline) {
			return got
		}
		time.Sleep(200 * time.Millisecond) // polls the session's state
	}
}

// landed renders the signal faults' counts.
func (r *rig) landed() string {
	var out []string
	for k, n := range r.happened {
		out = append(out, fmt.Sprintf("%s=%d", k, n))
	}
	if len(out) == 0 {
		return "none"
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// cliOf is the pid of s's running agent CLI (0: none): the process a
// node started with CAST_SESSION=s's id (the CLI's own children and a
// CLI a killed node left behind have another parent).
func (r *rig) cliOf(s *session) int {
	var nodes []int
	for _, n := range r.nodes {
		nodes = append(nodes, n.Proc.Cmd.Process.Pid)
	}
	parents := procParents()
	for pid, parent := range parents {
		if !slices.Contains(nodes, parent) {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00CAST_SESSION="+s.id+"\x00")) {
			return pid
		}
	}
	return 0
}

// descendants is every process below pid, as a service's control group
// holds them.
func descendants(pid int) []int {
	children := map[int][]int{}
	for p, parent := range procParents() {
		children[parent] = append(children[parent], p)
	}
	var out []int
	for next := []int{pid}; len(next) > 0; {
		p := next[0]
		next = next[1:]
		out = append(out, children[p]...)
		next = append(next, children[p]...)
	}
	return out
}

// procParents maps each process on the machine to its parent.
func procParents() map[int]int {
	entries, _ := os.ReadDir("/proc")
	out := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parent, ok := procField(pid, "PPid"); ok {
			out[pid], _ = strconv.Atoi(parent)
		}
	}
	return out
}

// procField is a field of /proc/pid/status.
func procField(pid int, name string) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// gone waits up to within for process pid to have exited (reaped, or a
// zombie its parent has yet to reap).
func gone(pid int, within time.Duration) bool { return exited(pid, true, within) }

// exited is gone counting a zombie as exited only when zombie says so.
func exited(pid int, zombie bool, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		state, ok := procField(pid, "State")
		if !ok || zombie && strings.HasPrefix(state, "Z") {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond) // polls the process's state
	}
}
