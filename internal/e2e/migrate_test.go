package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// migRig is a control plane and two real node processes, "laptop" and
// "linux", each with its own data dir, labels and agent homes (the real
// CLIs), all talking to one fake model. linux maps laptop's checkout root
// to its own.
type migRig struct {
	t        *testing.T
	c        *client.Client
	fake     *fakemodel.Server
	addr     string
	roots    map[string]string            // node -> checkout root
	homes    map[string]map[string]string // node -> agent -> HOME
	nodes    map[string]*testharness.Proc
	nodeArgs map[string][]string
	cast     cli
	cp       *testharness.Proc // when the control plane runs as a process
	cpDir    string
	lease    time.Duration // that process's node lease
}

// migOpts: cpEnv runs the control plane as a real process with that
// environment (fault tests kill it); nodeEnv adds environment per node.
// shortLease gives that process etcd's shortest node lease (2s), for tests
// of a node that goes silent; others get the harness's, which load cannot
// lapse.
type migOpts struct {
	cpProcess  bool
	cpEnv      []string
	nodeEnv    map[string][]string
	shortLease bool
	// reconnectMax caps the nodes' pauses between calls to a control
	// plane that is away (0: the node's default, 10s).
	reconnectMax time.Duration
	// cpConfig adjusts the in-process control plane's config (not with
	// cpProcess), e.g. a migration failpoint that holds a phase.
	cpConfig func(*controlplane.Config)
}

func newMigRig(t *testing.T, opts migOpts, agentNames ...string) *migRig {
	fake := fakemodel.Start(t)
	r := &migRig{t: t, fake: fake,
		roots: map[string]string{}, homes: map[string]map[string]string{}, nodes: map[string]*testharness.Proc{}, nodeArgs: map[string][]string{}}
	if opts.cpProcess {
		r.addr, r.cpDir, r.lease = freeAddr(t), t.TempDir(), testharness.TestLease
		if opts.shortLease {
			r.lease = 2 * time.Second
		}
		r.startControlPlane(opts.cpEnv)
	} else {
		r.addr = testharness.StartControlPlane(t, opts.cpConfig).Addr()
	}
	r.c = testharness.Dial(t, r.addr)
	r.cast = cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: []string{"CAST_ADDR=" + r.addr}}
	for _, name := range []string{"laptop", "linux"} {
		r.roots[name] = t.TempDir()
		r.homes[name] = map[string]string{}
		setups := map[string]map[string]any{}
		for _, a := range agentNames {
			home, aenv := agenttest.NodeEnv(t, a, fake.URL)
			r.homes[name][a] = home
			setups[a] = map[string]any{"bin": agenttest.Bin(t, a), "home": home, "env": aenv}
		}
		cfg := filepath.Join(t.TempDir(), "agents.json")
		b, _ := json.Marshal(setups)
		if err := os.WriteFile(cfg, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r.nodeArgs[name] = []string{"--controlplane", r.addr, "--data-dir", t.TempDir(), "--name", name,
			"--label", name, "--agents-config", cfg, "--log-level", "debug"}
	}
	if opts.reconnectMax > 0 {
		for name := range r.nodeArgs {
			r.nodeArgs[name] = append(r.nodeArgs[name], "--reconnect-max", opts.reconnectMax.String())
		}
	}
	r.nodeArgs["linux"] = append(r.nodeArgs["linux"], "--map-path", r.roots["laptop"]+"="+r.roots["linux"])
	for _, name := range []string{"laptop", "linux"} {
		r.startNode(name, opts.nodeEnv[name])
	}
	return r
}

// startControlPlane runs the control plane binary on r.addr and r.cpDir
// (a restart keeps both) and waits until it answers.
func (r *migRig) startControlPlane(env []string) {
	r.cp = testharness.StartProcEnv(r.t, env, filepath.Join(testharness.Binaries(r.t), "controlplane"),
		"--listen", r.addr, "--metrics-listen", "", "--data-dir", r.cpDir, "--node-lease-ttl", r.lease.String(), "--node-heartbeat", "500ms")
	c, err := client.DialToken(r.addr, testharness.AdminToken())
	if err != nil {
		r.t.Fatal(err)
	}
	defer c.Close()
	testharness.WaitFor(r.t, 30*time.Second, "control plane up", func() bool {
		_, err := c.Nodes.ListNodes(context.Background(), &castv1.ListNodesRequest{})
		return err == nil
	})
}

func (r *migRig) startNode(name string, env []string) {
	p := testharness.StartProcEnv(r.t, env, filepath.Join(testharness.Binaries(r.t), "node"), r.nodeArgs[name]...)
	r.nodes[name] = p
	testharness.WaitFor(r.t, 30*time.Second, name+" connected", func() bool {
		resp, err := r.c.Nodes.ListNodes(context.Background(), &castv1.ListNodesRequest{})
		for _, n := range resp.GetNodes() {
			if n.Name == name {
				return err == nil && n.Connected
			}
		}
		return false
	})
}

func (r *migRig) session(id string) *castv1.Session {
	r.t.Helper()
	s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

func (r *migRig) messages(id string) []*castv1.Message {
	r.t.Helper()
	resp, err := r.c.Sessions.ListMessages(context.Background(), &castv1.ListMessagesRequest{SessionId: id})
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.Messages
}

func (r *migRig) waitSession(what, id string, cond func(*castv1.Session) bool) *castv1.Session {
	r.t.Helper()
	var s *castv1.Session
	testharness.WaitFor(r.t, 3*time.Minute, what, func() bool {
		s = r.session(id)
		return cond(s)
	})
	return s
}

// repo makes a git checkout under node's root with a commit, an
// uncommitted change and an untracked file.
func (r *migRig) repo(node, name string) string {
	dir := filepath.Join(r.roots[node], name)
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			r.t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	git("config", "user.name", "t")
	git("config", "user.email", "t@cast.invalid")
	must(r.t, os.WriteFile(filepath.Join(dir, "app.txt"), []byte("v1\n"), 0o644))
	git("add", "-A")
	git("commit", "-q", "-m", "v1")
	must(r.t, os.WriteFile(filepath.Join(dir, "app.txt"), []byte("v2 uncommitted\n"), 0o644))
	must(r.t, os.WriteFile(filepath.Join(dir, "scratch.txt"), []byte("untracked\n"), 0o644))
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func inState(st castv1.SessionState) func(*castv1.Session) bool {
	return func(s *castv1.Session) bool { return s.State == st }
}

// countTurnsWith counts model turns whose newest user text holds mark.
func countTurnsWith(fake *fakemodel.Server, mark string) int {
	n := 0
	for _, req := range fake.Turns() {
		for i := len(req.Items) - 1; i >= 0; i-- {
			if it := req.Items[i]; it.Role == "user" && it.Kind == "text" {
				if strings.Contains(it.Text, mark) {
					n++
				}
				break
			}
		}
	}
	return n
}

// The scenario: a batch of sessions moves from laptop to the node
// labelled linux with the real CLIs. One is mid-turn (the migration waits
// for it), one waits on a permission prompt (it moves at once and is asked
// again on linux), one is idle on Codex. Messages sent during the move are
// held and delivered once, in order, on linux; the work trees arrive with
// their uncommitted and untracked changes; the agents are told they moved.
func TestMigrateBatchToLinux(t *testing.T) {
	t.Parallel()
	r := newMigRig(t, migOpts{}, "claude", "codex")
	ctx := context.Background()
	for _, n := range []string{"laptop", "linux"} { // Claude asks before touch, on both machines
		settings := filepath.Join(agenttest.NativeHome(r.homes[n]["claude"], "claude"), "settings.json")
		must(t, os.MkdirAll(filepath.Dir(settings), 0o700))
		must(t, os.WriteFile(settings, []byte(`{"permissions":{"ask":["Bash(touch:*)"]}}`), 0o600))
	}
	repos := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		repos[name] = r.repo("laptop", name)
	}
	create := func(agent, cwd, text string) string {
		s, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: agent, Cwd: cwd, Node: "laptop", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return s.Id
	}
	idle := create("codex", repos["c"], "hello codex")
	r.waitSession("codex session idle", idle, func(s *castv1.Session) bool {
		return s.State == castv1.SessionState_SESSION_STATE_IDLE && s.LastSeq >= 2
	})
	asking := create("claude", repos["b"], "TOOLCALL CMD[touch moved.txt]")
	r.waitSession("claude session at a permission prompt", asking, inState(castv1.SessionState_SESSION_STATE_WAITING_PERMISSION))
	r.fake.Enqueue(fakemodel.Reply{Text: "slow answer done", Delay: 8 * time.Second})
	busy := create("claude", repos["a"], "a slow question")
	r.waitSession("claude session mid-turn", busy, inState(castv1.SessionState_SESSION_STATE_RUNNING))

	mig := testharness.StartProcEnv(t, r.cast.env, r.cast.bin, "migrate", "start", "--to", "linux", "--wait", "2m", busy, asking, idle)
	r.waitSession("mid-turn session fenced", busy, func(s *castv1.Session) bool { return s.FencedBy != "" })
	var held []int64
	for _, text := range []string{"during move one", "during move two"} {
		resp, err := r.c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: busy, Text: text})
		if err != nil {
			t.Fatalf("a message sent during the move must be accepted: %v", err)
		}
		held = append(held, resp.Message.Seq)
	}
	code, ok := mig.Wait(4 * time.Minute)
	out := mig.Output()
	if !ok || code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("cast migrate start: exit %d (finished %v)\n%s", code, ok, out)
	}
	list, err := r.c.Migrations.ListMigrations(ctx, &castv1.ListMigrationsRequest{})
	if err != nil || len(list.Migrations) != 1 {
		t.Fatalf("list migrations: %v %v", err, list)
	}
	final := list.Migrations[0]
	for name, id := range map[string]string{"a": busy, "b": asking, "c": idle} {
		s := r.session(id)
		if want := filepath.Join(r.roots["linux"], name); s.Node != "linux" || s.Cwd != want || s.FencedBy != "" {
			t.Errorf("session %s after the move: node %q cwd %q fenced %q; want linux %s", id, s.Node, s.Cwd, s.FencedBy, want)
		}
		for file, body := range map[string]string{"app.txt": "v2 uncommitted\n", "scratch.txt": "untracked\n"} {
			got, err := os.ReadFile(filepath.Join(r.roots["linux"], name, file))
			if err != nil || string(got) != body {
				t.Errorf("work tree %s/%s on linux = %q, %v; want %q", name, file, got, err, body)
			}
		}
	}

	// The mid-turn session finished its turn on laptop, then ran the held
	// messages once, in order, on linux, told that it moved.
	r.waitSession("held messages answered on linux", busy, func(s *castv1.Session) bool {
		return s.State == castv1.SessionState_SESSION_STATE_IDLE && s.DeliveredSeq >= held[1]
	})
	if n := countTurnsWith(r.fake, "during move two"); n != 1 {
		t.Fatalf("the held messages reached the model in %d turns, want exactly 1", n)
	}
	for _, req := range r.fake.Turns() {
		if n := len(req.Items); n > 0 && strings.Contains(req.Items[n-1].Text, "during move two") {
			assertItems(t, req.Items, "a slow question", "slow answer done", "This session just moved to a different machine. It now runs on linux", "during move one", "during move two")
		}
	}
	msgs := r.messages(busy)
	// The held messages are stored while the slow answer is still coming.
	if got := kinds(msgs); !strings.HasPrefix(got, "user,user,user,assistant,notice,assistant") {
		t.Fatalf("transcript kinds = %s", got)
	}

	// The session that waited on a permission is asked again on linux; the
	// approved tool runs there, in the moved checkout.
	r.waitSession("permission asked again on linux", asking, func(s *castv1.Session) bool {
		return s.Node == "linux" && s.State == castv1.SessionState_SESSION_STATE_WAITING_PERMISSION
	})
	r.cast.must("approve", "-s", asking)
	r.waitSession("approved turn done on linux", asking, inState(castv1.SessionState_SESSION_STATE_IDLE))
	if _, err := os.Stat(filepath.Join(r.roots["linux"], "b", "moved.txt")); err != nil {
		t.Errorf("the approved tool did not run in linux's checkout: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.roots["laptop"], "b", "moved.txt")); err == nil {
		t.Error("the tool ran on laptop, which no longer owns the session")
	}

	// The idle Codex session resumes on linux from the rebuilt transcript.
	r.fake.Reset()
	resp, err := r.c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: idle, Text: "still there?"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitSession("codex answered on linux", idle, func(s *castv1.Session) bool {
		return s.State == castv1.SessionState_SESSION_STATE_IDLE && s.DeliveredSeq >= resp.Message.Seq && s.LastSeq > resp.Message.Seq
	})
	turns := r.fake.Turns()
	if len(turns) == 0 {
		t.Fatal("codex on linux sent no turn")
	}
	last := turns[len(turns)-1].Items
	assertItems(t, last, "hello codex", "This session just moved")
	if got := last[len(last)-1].Text; !strings.HasSuffix(got, "still there?") {
		t.Errorf("codex's prompt on linux = %q, want it to end with the new message", got)
	}

	// `cast drain` empties linux again (the checkouts are on a shared
	// filesystem here, so only the conversations move).
	out = r.cast.must("drain", "linux", "--to", "laptop", "--skip-worktree", "--json")
	var drained struct {
		State    string `json:"state"`
		Sessions []struct {
			SessionID string `json:"session_id"`
			State     string `json:"state"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(out), &drained); err != nil || drained.State != "MIGRATION_STATE_SUCCEEDED" || len(drained.Sessions) != 3 {
		t.Fatalf("cast drain --json: %v\n%s", err, out)
	}
	for _, id := range []string{busy, asking, idle} {
		if s := r.session(id); s.Node != "laptop" {
			t.Errorf("after drain, %s is on %q", id, s.Node)
		}
	}

	// `cast migrate ls` and `status` show it.
	if out := r.cast.must("migrate", "ls"); !strings.Contains(out, "succeeded") {
		t.Errorf("cast migrate ls:\n%s", out)
	}
	if out := r.cast.must("migrate", "status", final.Id); !strings.Contains(out, busy) || !strings.Contains(out, "succeeded (turn interrupted)") {
		t.Errorf("cast migrate status:\n%s", out)
	}
}
