package agenttest

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
)

// Terminal is a real CLI running in a tmux pane on a private tmux server,
// for what only an interactive terminal shows (session pickers). The
// server inherits exactly the env given, so HOME and the agents' config
// dirs are the test's scratch ones.
type Terminal struct {
	t    testing.TB
	sock string
	env  []string
}

// StartTerminal runs bin args in dir inside a fresh 200x50 tmux pane. The
// server is killed when the test ends.
func StartTerminal(t testing.TB, bin string, args, env []string, dir string) *Terminal {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatalf("agenttest: tmux is needed for terminal tests: %v", err)
	}
	term := &Terminal{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock"), env: env}
	// remain-on-exit keeps what a CLI that quit printed on screen.
	argv := append([]string{"start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";", "new-session", "-d", "-x", "200", "-y", "50", "-c", dir, "--", bin}, args...)
	term.tmux(argv...)
	pid, err := strconv.Atoi(strings.TrimSpace(term.tmux("display-message", "-p", "-t", "0", "#{pane_pid}")))
	if err != nil {
		t.Fatalf("agenttest: tmux pane pid: %v", err)
	}
	t.Cleanup(func() { term.stop(pid) })
	return term
}

// stop kills the pane's process group (the npm launchers' children
// included) and waits, bounded, until it is gone, so nothing still writes
// into the scratch HOME while the test removes it.
func (term *Terminal) stop(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	_, _ = term.run("kill-server")
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(-pgid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	reapHome(agents.EnvValue(term.env, "HOME"))
}

func (term *Terminal) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-S", term.sock, "-f", "/dev/null"}, args...)...)
	cmd.Env = term.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (term *Terminal) tmux(args ...string) string {
	term.t.Helper()
	out, err := term.run(args...)
	if err != nil {
		term.t.Fatalf("agenttest: tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out
}

// Send types keys into the pane (tmux key names: "Enter", "Escape", "C-c").
func (term *Terminal) Send(keys ...string) {
	term.t.Helper()
	term.tmux(append([]string{"send-keys", "-t", "0"}, keys...)...)
}

// Screen is what the pane shows now.
func (term *Terminal) Screen() string {
	term.t.Helper()
	out, err := term.run("capture-pane", "-p", "-t", "0")
	if err != nil {
		return "" // the pane is gone: the program exited
	}
	return out
}

// WaitFor polls the pane until ok accepts what it shows, failing the test
// with the last screen when within passes first.
func (term *Terminal) WaitFor(within time.Duration, what string, ok func(screen string) bool) string {
	term.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := term.Screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			term.t.Fatalf("agenttest: the terminal never showed %s within %v; it shows:\n%s", what, within, s)
		}
		time.Sleep(150 * time.Millisecond) // the poll interval of a bounded wait, not a synchronisation
	}
}

// WaitForText is WaitFor for a substring.
func (term *Terminal) WaitForText(within time.Duration, text string) string {
	term.t.Helper()
	return term.WaitFor(within, strconv.Quote(text), func(s string) bool { return strings.Contains(s, text) })
}

// Type types text literally (no key names).
func (term *Terminal) Type(text string) {
	term.t.Helper()
	term.tmux("send-keys", "-t", "0", "-l", text)
}
