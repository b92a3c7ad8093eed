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
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/agents/codex"
	"github.com/cast-dev/cast/internal/agents/pi"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/nodeagent"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
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
func (r *cliRig) startNode(name string, cb func(*nodeagent.Config)) {
	missing := filepath.Join(r.t.TempDir(), strings.Repeat("a-long-folder-name-", 6), "agent-cli")
	r.stops[name] = testharness.StartNode(r.t, r.addr, name, func(c *nodeagent.Config) {
		c.AgentBins = map[string]string{}
		c.Agents = map[string]nodeagent.AgentSetup{"claude": {Bin: missing}, "codex": {Bin: missing}}
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
	for _, l := range lines[1:] {
		if strings.Index(l, "ago") != strings.Index(lines[1], "ago") {
			t.Fatalf("rows are not aligned:\n%s", out)
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

// `cast read` on a terminal shows escape sequences from a transcript as
// text instead of sending them to the terminal; a pipe and --json get the
// bytes as stored.
func TestCLIReadEscapesControlsOnTerminal(t *testing.T) {
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
	cmd.Env = append(os.Environ(), c.env...)
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

// `cast watch` follows a session through two control plane restarts (a
// clean stop and a kill -9) and shows every message once, in order; a
// `cast send` issued while the control plane is down for longer than the old
// 3-attempt retry lasted is stored once when it comes back.
func TestCLIWatchAndSendRideOutControlPlaneRestarts(t *testing.T) {
	bins := testharness.Binaries(t)
	dataDir, addr := t.TempDir(), freeAddr(t)
	startCP := func() *testharness.Proc {
		return testharness.StartProc(t, filepath.Join(bins, "controlplane"), "--data-dir", dataDir, "--listen", addr,
			"--metrics-listen", "", "--node-lease-ttl", "2s", "--node-heartbeat", "500ms")
	}
	cp := startCP()
	c := cli{t: t, bin: filepath.Join(bins, "cast"), env: []string{"CAST_ADDR=" + addr, "HOME=" + t.TempDir()}}
	testharness.StartNode(t, addr, "n1", func(cfg *nodeagent.Config) {
		cfg.AgentBins, cfg.Agents = map[string]string{}, map[string]nodeagent.AgentSetup{"claude": {Bin: filepath.Join(t.TempDir(), "no-cli")}}
	})
	c.waitNode("n1", true)
	cl := testharness.Dial(t, addr)
	sess, err := cl.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Node: "n1", Cwd: t.TempDir(), HistoryMessages: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Sessions.AppendMessages(context.Background(), &castv1.AppendMessagesRequest{SessionId: sess.Id,
		Messages: []*castv1.Message{{ClientId: "h1", Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "MARK-0"}}}); err != nil {
		t.Fatal(err)
	}
	watch := testharness.StartProcEnv(t, c.env, c.bin, "watch", sess.Id)
	shown := func(mark string) func() bool {
		return func() bool { return strings.Contains(watch.Output(), mark) }
	}
	c.must("send", "-s", sess.Id, "MARK-1")
	testharness.WaitFor(t, 30*time.Second, "watch shows MARK-1", shown("MARK-1"))

	// A clean stop ends the watch stream; the send is issued while the
	// control plane is down and lands after it is back.
	if !cp.Stop(20 * time.Second) {
		t.Fatal("control plane did not stop on SIGTERM")
	}
	type result struct {
		out, errOut string
		code        int
	}
	sent, created := make(chan result, 1), make(chan result, 1)
	go func() {
		out, errOut, code := c.run("send", "-s", sess.Id, "MARK-2")
		sent <- result{out, errOut, code}
	}()
	go func() {
		out, errOut, code := c.run("new", "--agent", "claude", "--cwd", t.TempDir(), "--json", "MARK-NEW")
		created <- result{out, errOut, code}
	}()
	time.Sleep(5 * time.Second) // the outage: longer than a restart takes
	cp = startCP()
	if r := <-sent; r.code != 0 {
		t.Fatalf("send through the restart: exit %d: %s", r.code, r.errOut)
	}
	if r := <-created; r.code != 0 {
		t.Fatalf("new through the restart: exit %d: %s", r.code, r.errOut)
	}
	var list struct {
		Sessions []struct{ Title string } `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(c.must("ls", "--all", "--json")), &list); err != nil || len(list.Sessions) != 2 || list.Sessions[0].Title != "MARK-NEW" {
		t.Fatalf("sessions after a create through the restart: %v %+v", err, list)
	}
	testharness.WaitFor(t, 30*time.Second, "watch shows MARK-2", shown("MARK-2"))

	cp.Kill()
	cp = startCP()
	c.must("send", "-s", sess.Id, "MARK-3")
	testharness.WaitFor(t, 30*time.Second, "watch shows MARK-3", shown("MARK-3"))
	if code, exited := watch.Wait(0); exited {
		t.Fatalf("cast watch exited (%d):\n%s", code, watch.Output())
	}

	var read struct {
		Messages []struct {
			Seq  string `json:"seq"`
			Text string `json:"text"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(c.must("read", sess.Id, "--json")), &read); err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for _, m := range read.Messages {
		stored[m.Text]++
	}
	for _, mark := range []string{"MARK-0", "MARK-1", "MARK-2", "MARK-3"} {
		if stored[mark] != 1 {
			t.Fatalf("%s stored %d times", mark, stored[mark])
		}
	}
	// Every stored message appears in the watch exactly once, in seq order.
	out := watch.Output()
	var seqs []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "#") {
			seqs = append(seqs, strings.Fields(line)[0])
		}
	}
	var want []string
	for _, m := range read.Messages {
		want = append(want, "#"+m.Seq)
	}
	if got := strings.Join(seqs, " "); !strings.HasPrefix(got, strings.Join(want, " ")) {
		t.Fatalf("watch showed %s, stored %s:\n%s", got, strings.Join(want, " "), out)
	}
	if !strings.Contains(out, "reconnecting") {
		t.Fatalf("watch did not say it was reconnecting:\n%s", out)
	}
}

// A message to a session whose node is down is stored with a warning that
// says when it will run; draining that node fails each session at once with
// a hint to --skip-worktree, which then moves them.
func TestCLIDownNodeSendWarnsAndDrainSuggestsSkipWorktree(t *testing.T) {
	r := newCLIRig(t, "gone", "n2")
	var ids []string
	for range 6 {
		ids = append(ids, r.history("claude", "gone", "work").Id)
	}
	out, errOut, code := r.cli.run("send", "-s", ids[0], "while it is up")
	if code != 0 || strings.Contains(errOut, "warning") {
		t.Fatalf("send to a connected node: exit %d, out %q, err %q", code, out, errOut)
	}
	r.stops["gone"]()
	r.cli.waitNode("gone", false)

	out, errOut, code = r.cli.run("send", "-s", ids[0], "are you there?")
	if code != 0 || !strings.Contains(out, "sent #3") || !strings.Contains(errOut, "node gone is down") || !strings.Contains(errOut, "runs when gone is back") {
		t.Fatalf("send to a down node: exit %d, out %q, err %q", code, out, errOut)
	}

	start := time.Now()
	out, errOut, code = r.cli.run("drain", "gone", "--to", "n2")
	if code != 1 || strings.Count(out, "--skip-worktree") < len(ids) {
		t.Fatalf("drain of a down node: exit %d, out:\n%s\nerr: %s", code, out, errOut)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("drain of a down node took %s to fail", d)
	}
	r.cli.must("drain", "gone", "--to", "n2", "--skip-worktree")
	for _, id := range ids {
		if s, _ := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id}); s.GetNode() != "n2" {
			t.Fatalf("after drain --skip-worktree, %s is on %q", id, s.GetNode())
		}
	}
}

// What no node can run is refused before anything is stored: an agent no
// connected node has, a node without the agent, an account the node lacks.
func TestCLIRefusesUnplaceableSessionsUpFront(t *testing.T) {
	r := newCLIRig(t, "n1")
	r.startNode("n2", func(c *nodeagent.Config) {
		c.Agents = map[string]nodeagent.AgentSetup{"codex": c.Agents["codex"],
			"claude": {Bin: c.Agents["claude"].Bin, Accounts: map[string]nodeagent.AccountSetup{"personal": {}}}}
	})
	_, errOut, code := r.cli.run("new", "--agent", "grok", "--cwd", t.TempDir(), "hello")
	if code != 1 || !strings.Contains(errOut, "no connected node has the grok CLI") || !strings.Contains(errOut, "n1 (claude, codex)") {
		t.Fatalf("new --agent grok: exit %d %q", code, errOut)
	}
	_, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "grok", Cwd: t.TempDir(), Text: "hi"})
	if status.Code(err) != codes.FailedPrecondition || client.ReasonOf(err) != "NO_NODE_AVAILABLE" {
		t.Fatalf("CreateSession grok: %v (reason %q)", err, client.ReasonOf(err))
	}
	r.stops["n1"]()
	r.cli.waitNode("n1", false)
	if _, errOut, code := r.cli.run("new", "--agent", "claude", "--node", "n1", "hello"); code != 1 || !strings.Contains(errOut, "not connected") {
		t.Fatalf("new on a down node: exit %d %q", code, errOut)
	}
	if out := r.cli.must("ls", "--all", "--json"); strings.Contains(out, `"id"`) {
		t.Fatalf("a refused create stored a session:\n%s", out)
	}

	src := r.history("claude", "n2", "the work so far").Id
	_, errOut, code = r.cli.run("handoff", "-s", src, "--to", "same", "--account", "work", "-m", "go on")
	if code != 1 || !strings.Contains(errOut, `no claude account "work"`) || !strings.Contains(errOut, "personal") {
		t.Fatalf("handoff --account work: exit %d %q", code, errOut)
	}
	_, errOut, code = r.cli.run("handoff", "-s", src, "--to", "pi", "-m", "go on")
	if code != 1 || !strings.Contains(errOut, "node n2 has no pi CLI") {
		t.Fatalf("handoff --to pi: exit %d %q", code, errOut)
	}
	var list struct {
		Sessions []struct{ ID string } `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(r.cli.must("ls", "--all", "--json")), &list); err != nil || len(list.Sessions) != 1 {
		t.Fatalf("refused handoffs stored sessions: %v %+v", err, list)
	}
	r.cli.must("handoff", "-s", src, "--to", "same", "--account", "personal", "-m", "go on")
	if err := json.Unmarshal([]byte(r.cli.must("ls", "--all", "--json")), &list); err != nil || len(list.Sessions) != 2 {
		t.Fatalf("handoff --account personal stored no session: %v %+v", err, list)
	}
}

// `cast import` starts the session in the folder the native transcript
// records (not the shell's), and --cwd overrides it.
func TestCLIImportUsesTranscriptCwd(t *testing.T) {
	r := newCLIRig(t, "n1")
	r.startNode("n2", func(c *nodeagent.Config) { c.Agents = testharness.MissingAgents(t.TempDir()) })
	msgs := []transcript.Message{{Kind: transcript.KindUser, Text: "fix the parser"}, {Kind: transcript.KindAssistant, Text: "done"}}
	for _, tc := range []struct {
		agent string
		w     agents.Writer
	}{{"claude", claude.Writer{}}, {"codex", codex.Writer{}}, {"pi", pi.Writer{}}} {
		recorded := t.TempDir()
		out, err := tc.w.Write(agents.Target{Home: t.TempDir(), Cwd: recorded, SessionID: "origin" + tc.agent}, msgs)
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(r.cli.must("import", "--agent", tc.agent, "--node", "n2", out.Path))
		if got := r.sessionCwd(id); got != recorded {
			t.Errorf("%s import: cwd %q, want the transcript's %q", tc.agent, got, recorded)
		}
		other := t.TempDir()
		id = strings.TrimSpace(r.cli.must("import", "--agent", tc.agent, "--node", "n2", "--cwd", other, out.Path))
		if got := r.sessionCwd(id); got != other {
			t.Errorf("%s import --cwd: cwd %q, want %q", tc.agent, got, other)
		}
	}
}

func (r *cliRig) sessionCwd(id string) string {
	r.t.Helper()
	var s struct{ Cwd string }
	if err := json.Unmarshal([]byte(r.cli.must("get", id, "--json")), &s); err != nil {
		r.t.Fatal(err)
	}
	return s.Cwd
}

// `cast rm` archives (hidden from ls, closed to sends, still readable);
// --purge deletes every key of the session, chunks of a large message
// included; a running session is refused until it is interrupted.
func TestCLIRemoveArchivesAndPurges(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	r := newCLIRigWith(t, func(c *controlplane.Config) { c.EtcdEndpoints, c.DataDir = []string{ep}, "" })
	hang := filepath.Join(t.TempDir(), "hanging-agent")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.startNode("n1", func(c *nodeagent.Config) { c.Agents["codex"] = nodeagent.AgentSetup{Bin: hang} })
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	keysOf := func(id string) []string {
		resp, err := etcd.Get(context.Background(), "/cast/v1/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, kv := range resp.Kvs {
			if strings.Contains(string(kv.Key), "/"+id) {
				out = append(out, string(kv.Key))
			}
		}
		return out
	}

	kept := r.history("claude", "n1", "keep me").Id
	id := r.history("claude", "n1", "old work", strings.Repeat("big tool output ", 40<<10)).Id
	if keys := keysOf(id); !slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, "/chunks/") || strings.Contains(k, "/blobs/") }) {
		t.Fatalf("a 640 KB message left no chunk keys to purge: %v", keys)
	}
	if out := r.cli.must("rm", id); !strings.Contains(out, "archived "+id) {
		t.Fatalf("cast rm: %q", out)
	}
	if out := r.cli.must("ls"); strings.Contains(out, id) || !strings.Contains(out, kept) {
		t.Fatalf("cast ls after rm:\n%s", out)
	}
	if out := r.cli.must("ls", "--all"); !strings.Contains(out, id) || !strings.Contains(out, "archived") {
		t.Fatalf("cast ls --all after rm:\n%s", out)
	}
	if _, errOut, code := r.cli.run("send", "-s", id, "more"); code != 1 || !strings.Contains(errOut, "archived") || !strings.Contains(errOut, "cast fork "+id) {
		t.Fatalf("send to an archived session: exit %d %q", code, errOut)
	}
	if out := r.cli.must("read", id); !strings.Contains(out, "old work") {
		t.Fatalf("an archived session is not readable:\n%s", out)
	}
	if out := r.cli.must("rm", id, "--purge"); !strings.Contains(out, "deleted "+id) {
		t.Fatalf("cast rm --purge: %q", out)
	}
	if keys := keysOf(id); len(keys) != 0 {
		t.Fatalf("purge left keys: %v", keys)
	}
	if _, errOut, code := r.cli.run("read", id); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("read after purge: exit %d %q", code, errOut)
	}
	if len(keysOf(kept)) == 0 {
		t.Fatal("purge deleted another session's keys")
	}

	busy := strings.TrimSpace(r.cli.must("new", "--agent", "codex", "--node", "n1", "--cwd", t.TempDir(), "work for a while"))
	r.waitState(busy, castv1.SessionState_SESSION_STATE_RUNNING)
	for _, args := range [][]string{{"rm", busy}, {"rm", busy, "--purge"}} {
		if _, errOut, code := r.cli.run(args...); code != 1 || !strings.Contains(errOut, "cast interrupt -s "+busy) {
			t.Fatalf("cast %v on a running session: exit %d %q", args, code, errOut)
		}
	}
	r.cli.must("interrupt", "-s", busy)
	testharness.WaitFor(t, 30*time.Second, "turn stopped", func() bool {
		s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: busy})
		return err == nil && s.State != castv1.SessionState_SESSION_STATE_RUNNING
	})
	r.cli.must("rm", busy, "--purge")
	if keys := keysOf(busy); len(keys) != 0 {
		t.Fatalf("purge left keys: %v", keys)
	}
}

// `cast node rm` forgets a node that is gone; it refuses a connected node
// and one that still owns sessions (unless --force, after which a drain
// still moves them).
func TestCLINodeRemove(t *testing.T) {
	r := newCLIRig(t, "gone", "empty", "n2")
	id := r.history("claude", "gone", "left behind").Id
	if _, errOut, code := r.cli.run("node", "rm", "n2"); code != 1 || !strings.Contains(errOut, "node n2 is connected") {
		t.Fatalf("node rm of a connected node: exit %d %q", code, errOut)
	}
	r.stops["gone"]()
	r.stops["empty"]()
	r.cli.waitNode("gone", false)
	r.cli.waitNode("empty", false)
	if _, errOut, code := r.cli.run("node", "rm", "gone"); code != 1 || !strings.Contains(errOut, "still owns 1 session") ||
		!strings.Contains(errOut, "cast drain gone --skip-worktree") || !strings.Contains(errOut, "--force") {
		t.Fatalf("node rm of a node with sessions: exit %d %q", code, errOut)
	}
	if _, errOut, code := r.cli.run("node", "rm", "nosuch"); code != 1 || !strings.Contains(errOut, "not registered") {
		t.Fatalf("node rm of an unknown node: exit %d %q", code, errOut)
	}
	r.cli.must("node", "rm", "empty")
	if out := r.cli.must("node", "rm", "gone", "--force"); !strings.Contains(out, "1 session(s)") {
		t.Fatalf("node rm --force: %q", out)
	}
	for _, n := range r.cli.nodes() {
		if n.Name == "gone" || n.Name == "empty" {
			t.Fatalf("cast nodes still lists %s", n.Name)
		}
	}
	r.cli.must("drain", "gone", "--to", "n2", "--skip-worktree")
	if s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id}); err != nil || s.Node != "n2" {
		t.Fatalf("the forgotten node's session after a drain: %v %v", s, err)
	}
}
