package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// cliRig is an in-process control plane (embedded etcd) with nodes whose
// agents point at a CLI path that does not exist: a turn fails at once with
// "binary not found" and that path in its reason, and no model is needed.
type cliRig struct {
	t     *testing.T
	c     *client.Client
	cli   cli
	addr  string
	stops map[string]func()
}

func newCLIRig(t *testing.T, nodes ...string) *cliRig {
	return newCLIRigWith(t, nil, nodes...)
}

// newCLIRigWith lets cb change the control plane's config.
func newCLIRigWith(t *testing.T, cb func(*controlplane.Config), nodes ...string) *cliRig {
	srv := testharness.StartControlPlane(t, cb)
	r := &cliRig{t: t, c: testharness.Dial(t, srv.Addr()), addr: srv.Addr(), stops: map[string]func(){},
		cli: cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: []string{"CAST_ADDR=" + srv.Addr(), "HOME=" + t.TempDir()}}}
	for _, n := range nodes {
		r.startNode(n, nil)
	}
	return r
}

// startNode starts an in-process node whose claude and codex are missing;
// cb may change its config further.
func (r *cliRig) startNode(name string, cb func(*node.Config)) {
	missing := filepath.Join(r.t.TempDir(), strings.Repeat("a-long-folder-name-", 6), "agent-cli")
	r.stops[name] = testharness.StartNode(r.t, r.addr, name, func(c *node.Config) {
		c.AgentBins = map[string]string{}
		c.Agents = map[string]node.AgentSetup{"claude": {Bin: missing}, "codex": {Bin: missing}}
		if cb != nil {
			cb(c)
		}
	})
	r.cli.waitNode(name, true)
}

// history creates a session holding texts as imported history (no turn runs).
func (r *cliRig) history(agent, node string, texts ...string) *castv1.Session {
	r.t.Helper()
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: agent, Node: node, Cwd: r.t.TempDir(),
		Title: "history " + agent, HistoryMessages: int64(len(texts))})
	if err != nil {
		r.t.Fatal(err)
	}
	var msgs []*castv1.Message
	for i, text := range texts {
		msgs = append(msgs, &castv1.Message{ClientId: fmt.Sprintf("%s.%d", sess.Id, i), Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: text})
	}
	if len(msgs) > 0 {
		if _, err := r.c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: msgs}); err != nil {
			r.t.Fatal(err)
		}
	}
	return sess
}

func (r *cliRig) waitState(id string, st castv1.SessionState) *castv1.Session {
	r.t.Helper()
	var sess *castv1.Session
	testharness.WaitFor(r.t, 30*time.Second, fmt.Sprintf("session %s %v", id, st), func() bool {
		var err error
		sess, err = r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
		return err == nil && sess.State == st
	})
	return sess
}

// `cast ls` is newest first, filters by agent, node and state, keeps the
// state column narrow however long a failure reason is; `cast get` shows
// one session whole.
func TestCLIListFiltersAndGet(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t, "n1", "n2")
	failed := strings.TrimSpace(r.cli.must("new", "--agent", "claude", "--node", "n1", "--cwd", t.TempDir(), "this turn fails"))
	r.waitState(failed, castv1.SessionState_SESSION_STATE_FAILED)
	idle := r.history("codex", "n2", "old work").Id
	newest := r.history("claude", "n2").Id

	out := r.cli.must("ls")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("cast ls:\n%s", out)
	}
	for i, id := range []string{newest, idle, failed} {
		if !strings.HasPrefix(lines[i+1], id+" ") {
			t.Fatalf("row %d is not %s (newest first):\n%s", i+1, id, out)
		}
	}
	if col := strings.Index(lines[0], "MSGS"); col < 0 || col > 60 {
		t.Fatalf("the state column is %d wide; a failure reason widened it:\n%s", col, out)
	}
	// Every cell starts where its column's header does.
	for _, col := range []string{"STATE", "MSGS", "UPDATED", "TITLE"} {
		at := strings.Index(lines[0], col)
		for _, l := range lines[1:] {
			if len(l) <= at || l[at-1] != ' ' || l[at] == ' ' {
				t.Fatalf("column %s is not aligned:\n%s", col, out)
			}
		}
	}
	if row := lines[3]; !strings.Contains(row, "failed") || !strings.Contains(row, "binary not found") || !strings.HasSuffix(row, "…") {
		t.Fatalf("the failed row should show its reason cut short:\n%s", row)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--agent", "codex"}, []string{idle}},
		{[]string{"--node", "n2"}, []string{newest, idle}},
		{[]string{"--state", "failed"}, []string{failed}},
		{[]string{"--state", "idle", "--agent", "claude"}, []string{newest}},
	} {
		var got struct {
			Sessions []struct{ ID string } `json:"sessions"`
		}
		if err := json.Unmarshal([]byte(r.cli.must(append([]string{"ls", "--json"}, tc.args...)...)), &got); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range got.Sessions {
			ids = append(ids, s.ID)
		}
		if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
			t.Errorf("cast ls %v = %v, want %v", tc.args, ids, tc.want)
		}
	}
	if _, errOut, code := r.cli.run("ls", "--state", "sleeping"); code != 2 || !strings.Contains(errOut, "waiting_permission") {
		t.Fatalf("ls --state sleeping: exit %d %q", code, errOut)
	}

	got := r.cli.must("get", failed)
	for _, want := range []string{"agent:", "claude", "node:", "n1", "state:", "failed", "last error:", "binary not found",
		"cwd:", "messages:", "created:", "updated:"} {
		if !strings.Contains(got, want) {
			t.Fatalf("cast get lacks %q:\n%s", want, got)
		}
	}
	var js struct {
		ID, Agent, Node, State string
	}
	if err := json.Unmarshal([]byte(r.cli.must("describe", idle, "--json")), &js); err != nil || js.ID != idle || js.Agent != "codex" || js.Node != "n2" {
		t.Fatalf("cast describe --json: %v %+v", err, js)
	}
	if _, errOut, code := r.cli.run("get", "zzzzzzz"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("get of a missing session: exit %d %q", code, errOut)
	}
}

// A session whose turn failed holding its message (the agent's CLI is not
// on the node: the message runs with the next one, not before) runs
// nothing: `cast interrupt` (and a switch, by the same rule) sends the node
// no interrupt. It did ("interrupt sent"), and the node refused it and it
// and the control plane each logged a warning.
func TestInterruptOfAFailedSessionHoldingItsMessage(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t, "n1")
	id := strings.TrimSpace(r.cli.must("new", "--agent", "claude", "--node", "n1", "--cwd", t.TempDir(), "this turn fails"))
	sess := r.waitState(id, castv1.SessionState_SESSION_STATE_FAILED)
	if sess.DeliveredSeq != 0 || sess.HeldSeq != 1 {
		t.Fatalf("failed session: delivered seq %d, held seq %d; want the message held (0 and 1)", sess.DeliveredSeq, sess.HeldSeq)
	}
	if out := r.cli.must("interrupt", id); !strings.Contains(out, "nothing to stop") {
		t.Fatalf("cast interrupt of a failed session holding its message: %q; want nothing to stop", out)
	}
}

// `cast read` on a terminal shows escape sequences from a transcript as
// text instead of sending them to the terminal; a pipe and --json get the
// bytes as stored.
func TestCLIReadEscapesControlsOnTerminal(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t, "n1")
	evil := "look \x1b]0;pwned\x07\x1b[2J\x1b[31mred\r\u202eevil\u009b done"
	id := r.history("claude", "n1", evil).Id

	piped := r.cli.must("read", id)
	if !strings.Contains(piped, evil) {
		t.Fatalf("piped read changed the text: %q", piped)
	}
	tty := runOnTerminal(t, r.cli, "read", id)
	if strings.ContainsAny(tty, "\x1b\x07\r\u202e\u009b") {
		t.Fatalf("control characters reached the terminal: %q", tty)
	}
	for _, want := range []string{`look \x1b]0;pwned\x07\x1b[2J\x1b[31mred\x0d\u202eevil\u009b done`} {
		if !strings.Contains(tty, want) {
			t.Fatalf("terminal read %q lacks %q", tty, want)
		}
	}
	if js := runOnTerminal(t, r.cli, "read", id, "--json"); !strings.Contains(js, `\u001b]0;pwned`) {
		t.Fatalf("--json on a terminal is not the stored text: %q", js)
	}
}

// runOnTerminal runs the cast CLI with stdout on a pseudo-terminal and
// returns what it printed (the terminal's output side).
func runOnTerminal(t *testing.T, c cli, args ...string) string {
	t.Helper()
	master, slave := openPTY(t)
	cmd := exec.Command(c.bin, args...)
	cmd.Env = testharness.CLIEnv(t, c.env)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = slave, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { _, err := io.Copy(&out, master); done <- err }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("cast %v: %v: %s", args, err, errb.String())
	}
	select {
	case err := <-done: // EIO once the last writer is gone
		if err != nil && !errors.Is(err, syscall.EIO) {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("terminal output did not end")
	}
	// The terminal turns \n into \r\n on output; undo that, keep any other \r.
	return strings.ReplaceAll(out.String(), "\r\n", "\n")
}

// openPTY opens a pseudo-terminal pair with the kernel's /dev/ptmx.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty slave: %v", err)
	}
	return m, s
}
