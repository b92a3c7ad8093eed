package testharness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	_ "github.com/cast-dev/cast/internal/agents/codecs" // in-process nodes and control planes know every agent, as the binaries do
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// BuildVersion and BuildRevision are what the binaries Binaries builds
// report (the Makefile sets the same variables).
const (
	BuildVersion  = "v0.0.0-harness"
	BuildRevision = "0123456789abcdef0123456789abcdef01234567"
	versionPkg    = "github.com/cast-dev/cast/internal/version"
)

// RepoRoot is the module root (where go.mod is).
func RepoRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// BinariesEnv names a folder holding cast, controlplane and node built by
// Build (the Makefile's test target builds them once for every package
// that starts them, instead of once per package: ~25 CPU-s each).
const BinariesEnv = "CAST_TEST_BINARIES"

// Binaries returns the folder holding cast, controlplane and node: the
// one BinariesEnv names, else one it builds once per test process
// (integration tests run the real binaries, as Tailscale's do).
func Binaries(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv(BinariesEnv); dir != "" {
		for _, b := range []string{"cast", "controlplane", "node"} {
			if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
				t.Fatalf("%s=%s: %v (build them with `go run ./internal/testharness/buildbins DIR`)", BinariesEnv, dir, err)
			}
		}
		return dir
	}
	root := RepoRoot(t)
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "cast-bin-")
		if buildErr == nil {
			buildErr = Build(root, buildDir)
		}
	})
	if buildErr != nil {
		t.Fatalf("build binaries: %v", buildErr)
	}
	return buildDir
}

// Build builds cast, controlplane and node of the module at root into dir.
// They are linked as the Makefile links them (no symbol table or DWARF,
// the version flags), so version tests see the flags work; the
// toolchain's VCS stamp (present or not, as the machine's GOFLAGS and the
// checkout have it) never wins over them (internal/version).
func Build(root, dir string) error {
	cmd := exec.Command("go", "build", "-ldflags", "-s -w -X "+versionPkg+".Version="+BuildVersion+" -X "+versionPkg+".Revision="+BuildRevision,
		"-o", dir+"/", "./cmd/cast", "./cmd/controlplane", "./cmd/node")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return &buildError{err: err, out: stderr.String()}
	}
	return nil
}

// RemoveBinaries removes what Binaries built in this process. The folder
// outlives every test of the package, so no test's cleanup can remove it:
// a package whose tests start cast's binaries removes it when they are
// done (Main), else each run leaves three binaries in the temporary
// folder.
func RemoveBinaries() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// Main runs a package's tests, removes the binaries they built
// (RemoveBinaries) and exits with the tests' code: the TestMain of a
// package whose tests call Binaries.
func Main(m *testing.M) {
	code := m.Run()
	RemoveBinaries()
	os.Exit(code)
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// Proc is a daemon started for a test, in its own process group.
type Proc struct {
	Cmd  *exec.Cmd
	Logs *bytes.Buffer
	done chan struct{}
	mu   sync.Mutex
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// StartProc starts bin with args; it is killed at cleanup. Its output is
// kept and printed if the test fails.
func StartProc(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	return StartProcEnv(t, nil, bin, args...)
}

// StartProcEnv is StartProc with env added to the test's environment
// (CAST_FAILPOINTS for fault tests).
func StartProcEnv(t testing.TB, env []string, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Logs: &bytes.Buffer{}, done: make(chan struct{})}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Env = append(ScratchEnv(t), env...)
	p.Cmd.Stdout = lockedWriter{&p.mu, p.Logs}
	p.Cmd.Stderr = lockedWriter{&p.mu, p.Logs}
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() { _ = p.Cmd.Wait(); close(p.done) }()
	reapAtEnd(t)
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), p.Output())
		}
	})
	return p
}

// reaping holds the tests whose leftover processes are killed at the end.
var reaping sync.Map

// reapAtEnd kills, once t's other cleanups ran and before its folders are
// removed, every process left with a HOME in t's folders (every process a
// test starts has one): what a daemon left running there, such as a CLI
// in a process group of its own that outlived the daemon's kill and
// still wrote into the folders being removed. Registered at t's first
// process, so it runs after the cleanups registered later, which may
// still need those processes.
func reapAtEnd(t testing.TB) {
	if _, seen := reaping.LoadOrStore(t, true); seen {
		return
	}
	root := filepath.Dir(t.TempDir())
	t.Cleanup(func() {
		agenttest.ReapUnder(root)
		reaping.Delete(t)
	})
}

// homeVars point a process at a user's own folders; ScratchEnv drops them.
var homeVars = append([]string{"HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"},
	agents.HomeVars()...)

// ScratchEnv is the test's environment with HOME a fresh t.TempDir() and
// every variable that would point an agent at the real home dropped: a
// node runs its user's own agents by default, and a test's must never be
// the real ones. Go's caches stay where they are.
func ScratchEnv(t testing.TB) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(homeVars, k) {
			env = append(env, kv)
		}
	}
	// Nodes canary the agent CLIs they find only in tests that ask
	// (CAST_AGENT_CHECKS=on after this): each check runs real CLIs. They
	// adopt the native sessions in their homes only in tests that pass
	// --adopt: every other test counts the sessions it made itself.
	return append(append(append(env, goDirs()...), AuthEnv()...), "HOME="+t.TempDir(), "CAST_AGENT_CHECKS=off", "CAST_ADOPT=off")
}

// goDirs pins Go's caches (found under the real HOME) for processes that
// get a scratch one.
var goDirs = sync.OnceValue(func() []string {
	var out []string
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		if v, err := exec.Command("go", "env", k).Output(); err == nil && os.Getenv(k) == "" {
			out = append(out, k+"="+strings.TrimSpace(string(v)))
		}
	}
	return out
})

// Wait waits up to timeout for the process to exit by itself and returns
// its exit code (-1 for a signal); ok is false on timeout.
func (p *Proc) Wait(timeout time.Duration) (code int, ok bool) {
	select {
	case <-p.done:
		return p.Cmd.ProcessState.ExitCode(), true
	case <-time.After(timeout):
		return 0, false
	}
}

// Output returns what the process printed so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Logs.String()
}

// AwaitLine waits up to timeout for the process to print line (the one a
// daemon prints once it serves); the error, naming what with the output so
// far, says whether it exited first.
func (p *Proc) AwaitLine(line, what string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.Output(), line) {
		if _, exited := p.Wait(20 * time.Millisecond); exited || time.Now().After(deadline) {
			return fmt.Errorf("%s did not start (exited %v):\n%s", what, exited, p.Output())
		}
	}
	return nil
}

// Signal sends sig to the process group.
func (p *Proc) Signal(sig syscall.Signal) { _ = syscall.Kill(-p.Cmd.Process.Pid, sig) }

// Kill is kill -9 of the whole group, then waits for the exit.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to timeout for a clean exit.
func (p *Proc) Stop(timeout time.Duration) bool {
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		p.Kill()
		return false
	}
}

// Run runs a short command (the cast CLI) and returns stdout, stderr and
// the exit code.
func Run(t testing.TB, env []string, bin string, args ...string) (string, string, int) {
	t.Helper()
	return RunInput(t, env, nil, 60*time.Second, bin, args...)
}

// CLIEnv is the environment a test runs the cast CLI with: a scratch HOME
// and config dir (the CLI never reads the real ~/.config/cast), the
// test's credentials, then env.
func CLIEnv(t testing.TB, env []string) []string {
	return append(ScratchEnv(t), append([]string{"XDG_CONFIG_HOME=" + t.TempDir()}, env...)...)
}

// RunInput is Run with stdin reading in (nil: /dev/null), as a shell
// pipes into it, and timeout to finish.
func RunInput(t testing.TB, env []string, in io.Reader, timeout time.Duration, bin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = CLIEnv(t, env)
	cmd.Stdin = in
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s: %v", bin, err)
	}
	return out.String(), errb.String(), code
}
