package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/testharness"
)

// The README's claims about a control plane restart, as a person on
// `controlplane --dev` meets them: "a restart keeps every session", "`cast
// send` and `cast new` ... retry ... through a control plane restart
// without storing a message twice" and "`cast watch` reconnects and
// resumes after the last message it showed". Real processes only: the
// --dev control plane with its node and real claude against the fake
// model, `cast` with the context --dev writes, a scratch HOME. A `cast
// watch` left running across the restart shows a message sent while the
// control plane was down and one sent after; each is stored once, and a
// session made while it was down exists once; the context keeps its token.
// Only --rotate-dev-token replaces it, and the old one is refused at once.
func TestDevRestartKeepsCastWatchAndSend(t *testing.T) {
	t.Parallel()
	fake := fakemodel.Start(t)
	home, _ := userHome(t, fake.URL)
	addr := freeAddr(t)
	// The harness's own credentials blanked (testharness.StartProcEnv and
	// Run put them back first): every process here has only what --dev
	// gives the user, the context's token.
	env := append(userEnv(t, home, addr), "CAST_TOKEN=", "CAST_JOIN_TOKEN=", "CAST_BOOTSTRAP_TOKEN=")
	dev := startUserDev(t, env, addr)
	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: env}
	c.waitNode("devnode", true)
	token := devToken(t, home)

	id := strings.TrimSpace(c.must("new", "--agent", "claude", "--cwd", t.TempDir(), "MARK-0"))
	waitAnswers(t, c, id, 1)
	watch := testharness.StartProcEnv(t, env, c.bin, "watch", id)
	shown := func(mark string) func() bool {
		return func() bool { return strings.Contains(watch.Output(), mark) }
	}
	testharness.WaitFor(t, 30*time.Second, "watch shows MARK-0", shown("MARK-0"))

	// Down: a send issued now (it reads its token at once, then retries)
	// is stored once the control plane is back. The watch is held
	// (SIGSTOP) until the new control plane is fully up, so it comes back
	// after the context was written, as a client whose retry does not
	// land in the new process's first instant does.
	watch.Signal(syscall.SIGSTOP)
	if !dev.Stop(30 * time.Second) {
		t.Fatal("dev control plane did not stop on SIGTERM")
	}
	send := testharness.StartProcEnv(t, env, c.bin, "send", id, "MARK-1")
	created := testharness.StartProcEnv(t, env, c.bin, "new", "--agent", "claude", "--cwd", t.TempDir(), "MARK-NEW")
	dev = restartDev(t, env, addr, []*testharness.Proc{watch})
	for what, p := range map[string]*testharness.Proc{"send": send, "new": created} {
		if code, ok := p.Wait(60 * time.Second); !ok || code != 0 {
			t.Fatalf("cast %s through the restart: exit %d (ended %v):\n%s", what, code, ok, p.Output())
		}
	}
	if out := c.must("ls", "--json"); strings.Count(out, "MARK-NEW") != 1 {
		t.Fatalf("the session made by cast new through the restart, listed %d times:\n%s", strings.Count(out, "MARK-NEW"), out)
	}
	testharness.WaitFor(t, 30*time.Second, "watch shows MARK-1, sent while the control plane was down", shown("MARK-1"))
	waitAnswers(t, c, id, 2)
	c.must("send", id, "MARK-2")
	testharness.WaitFor(t, 30*time.Second, "watch shows MARK-2, sent after the restart", shown("MARK-2"))
	if code, exited := watch.Wait(0); exited {
		t.Fatalf("cast watch exited (%d) across the restart:\n%s", code, watch.Output())
	}
	if got := devToken(t, home); got != token {
		t.Fatal("a --dev restart replaced the dev context's token")
	}
	stored := map[string]int{}
	for _, m := range readTexts(t, c, id) {
		stored[m]++
	}
	for _, mark := range []string{"MARK-0", "MARK-1", "MARK-2"} {
		if stored[mark] != 1 {
			t.Fatalf("%s stored %d times: %v", mark, stored[mark], stored)
		}
	}

	// Asked to, a start makes a new token and the old one is revoked:
	// the running watch, still presenting it, is refused and says why.
	waitAnswers(t, c, id, 3)
	watch.Signal(syscall.SIGSTOP)
	if !dev.Stop(30 * time.Second) {
		t.Fatal("dev control plane did not stop on SIGTERM")
	}
	restartDev(t, env, addr, []*testharness.Proc{watch}, "--rotate-dev-token")
	c.waitNode("devnode", true)
	if devToken(t, home) == token {
		t.Fatal("--rotate-dev-token kept the token")
	}
	if code, ok := watch.Wait(30 * time.Second); !ok || code == 0 || !strings.Contains(watch.Output(), "unknown or revoked") {
		t.Fatalf("cast watch on the rotated-away token: exit %d (ended %v):\n%s", code, ok, watch.Output())
	}
}

// restartDev starts `controlplane --dev` again and, once it is ready,
// lets the held casts run on (SIGCONT).
func restartDev(t *testing.T, env []string, addr string, held []*testharness.Proc, extra ...string) *testharness.Proc {
	t.Helper()
	dev := startUserDev(t, env, addr, extra...)
	testharness.WaitFor(t, 60*time.Second, "the dev control plane is ready", func() bool {
		return strings.Contains(dev.Output(), "dev mode ready")
	})
	for _, p := range held {
		p.Signal(syscall.SIGCONT)
	}
	return dev
}

// devToken is the token of the context --dev wrote into home.
func devToken(t *testing.T, home string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, ".config", "cast", "config.yaml"))
	must(t, err)
	var cfg struct {
		Contexts map[string]struct {
			Token string `yaml:"token"`
		} `yaml:"contexts"`
	}
	must(t, yaml.Unmarshal(b, &cfg))
	if cfg.Contexts["dev"].Token == "" {
		t.Fatalf("no dev context token in:\n%s", b)
	}
	return cfg.Contexts["dev"].Token
}

// readTexts is the text of every stored message of session id.
func readTexts(t *testing.T, c cli, id string) []string {
	t.Helper()
	var read struct {
		Messages []struct {
			Text string `json:"text"`
		} `json:"messages"`
	}
	must(t, json.Unmarshal([]byte(c.must("read", id, "--json")), &read))
	var out []string
	for _, m := range read.Messages {
		out = append(out, m.Text)
	}
	return out
}

// waitAnswers waits until session id holds n answers from the fake model
// and is idle, so a restart never cuts a turn (what a cut turn does is
// another test's).
func waitAnswers(t *testing.T, c cli, id string, n int) {
	t.Helper()
	testharness.WaitFor(t, 3*time.Minute, "the session answered and is idle", func() bool {
		read, _, _ := c.run("read", id)
		get, _, _ := c.run("get", id, "--json")
		return strings.Count(read, "FAKE-ANSWER") >= n && strings.Contains(get, "SESSION_STATE_IDLE")
	})
}
