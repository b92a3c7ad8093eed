package node_test

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
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/treemove"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// dirtyRepo makes a repository with one commit and an uncommitted change,
// git running with a private HOME.
func dirtyRepo(t *testing.T, dir string) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.name", "t"}, {"config", "user.email", "t@cast.invalid"}} {
		gitIn(t, dir, args...)
	}
	writeIn(t, dir, "main.go", "package main\n")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "first")
	writeIn(t, dir, "main.go", "package main\n\n// uncommitted\n")
}

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func writeIn(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// standInNode connects as node name and hands the test the commands sent
// to it: a migration's destination that answers only when the test does.
func standInNode(t *testing.T, c *client.Client, name string) <-chan *castv1.Command {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := c.Nodes.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hello := &castv1.Hello{Node: &castv1.Node{Name: name, Agents: []*castv1.AgentInstall{{Name: "claude"}, {Name: "codex"}}}}
	if err := stream.Send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Hello{Hello: hello}}); err != nil {
		t.Fatal(err)
	}
	go testharness.Heartbeats(ctx, stream) // the commit needs it connected
	cmds := make(chan *castv1.Command, 64)
	go func() {
		for {
			f, err := stream.Recv()
			if err != nil {
				return
			}
			if cmd := f.GetCommand(); cmd != nil {
				select {
				case cmds <- cmd:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return cmds
}

func awaitCommand(t *testing.T, cmds <-chan *castv1.Command, want func(*castv1.Command) bool) {
	t.Helper()
	timeout := time.After(3 * time.Minute)
	for {
		select {
		case cmd := <-cmds:
			if want(cmd) {
				return
			}
		case <-timeout:
			t.Fatal("command not received")
		}
	}
}

// moveFromLaptop creates a session on node laptop in cwd and starts req's
// migration of it.
func moveFromLaptop(t *testing.T, c *client.Client, cwd string, req *castv1.StartMigrationRequest) (*castv1.Session, *castv1.Migration) {
	t.Helper()
	sess, err := c.Sessions.CreateSession(ctxT(t), &castv1.CreateSessionRequest{Agent: "claude", Cwd: cwd, Node: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	req.SessionIds = []string{sess.Id}
	m, err := c.Migrations.StartMigration(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return sess, m
}

// awaitSucceeded waits for migration id to end, and fails the test unless
// it succeeded.
func awaitSucceeded(t *testing.T, c *client.Client, id string) {
	t.Helper()
	var m *castv1.Migration
	testharness.WaitFor(t, 3*time.Minute, "migration "+id+" to end", func() bool {
		var err error
		if m, err = c.Migrations.GetMigration(ctxT(t), &castv1.GetMigrationRequest{Id: id}); err != nil {
			t.Fatal(err)
		}
		s := m.State
		return s == castv1.MigrationState_MIGRATION_STATE_SUCCEEDED || s == castv1.MigrationState_MIGRATION_STATE_FAILED ||
			s == castv1.MigrationState_MIGRATION_STATE_CANCELLED
	})
	if m.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		t.Fatalf("migration %v: %s", m.State, m.Sessions[0].Reason)
	}
}

// noteManifest is the manifest the source's --clean-source note holds.
func noteManifest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var n struct {
		Manifest json.RawMessage `json:"manifest"`
	}
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatal(err)
	}
	return string(n.Manifest)
}

// The migration resends an export the source has not answered yet, and
// one that reaches the source after its first export finished bundled the
// checkout again and rewrote the --clean-source note with that second
// manifest, while the control plane kept the first upload. A checkout
// changed in between was then stashed away at the release although the
// destination never got those changes. A resent export of an upload the
// control plane stored keeps the first export's note.
func TestResentExportKeepsTheFirstExportsNote(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	dirtyRepo(t, repo)
	cp := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, cp.Addr())
	var data string
	src, _ := testharness.StartNodeDaemon(t, cp.Addr(), "laptop", func(cfg *node.Config) { data = cfg.DataDir })
	dst := standInNode(t, c, "dst")
	testharness.WaitConnected(t, c, "laptop", true)
	testharness.WaitConnected(t, c, "dst", true)
	ctx := ctxT(t)
	sess, m := moveFromLaptop(t, c, repo, &castv1.StartMigrationRequest{To: "dst", CleanSource: true})
	// The import is asked once the control plane stored the upload.
	awaitCommand(t, dst, func(cmd *castv1.Command) bool { return cmd.GetImportWorkTree().GetSessionId() == sess.Id })
	note := filepath.Join(data, "moves", sess.Id+".clean.json")
	first := noteManifest(t, note)
	writeIn(t, repo, "later.txt", "written after the export\n")
	src.ExportWorkTree(ctx, &castv1.ExportWorkTree{MigrationId: m.Id, SessionId: sess.Id, Cwd: repo, CleanSource: true, TargetNode: "dst"})
	if got := noteManifest(t, note); got != first {
		t.Errorf("note after a resent export holds %s; want the first export's, which the control plane kept: %s", got, first)
	}
	if _, err := c.Nodes.ReportWorkTree(ctx, &castv1.ReportWorkTreeRequest{MigrationId: m.Id, SessionId: sess.Id, Node: "dst",
		Phase: "import", Cwd: repo}); err != nil {
		t.Fatal(err)
	}
	awaitSucceeded(t, c, m.Id)
	// The release reads the note and drops it: the checkout is settled.
	testharness.WaitFor(t, time.Minute, "the clean-source note gone", func() bool {
		_, err := os.Stat(note)
		return os.IsNotExist(err)
	})
	if b, err := os.ReadFile(filepath.Join(repo, "later.txt")); err != nil || !strings.Contains(string(b), "after the export") {
		t.Errorf("later.txt, which never moved, after the release: %q, %v; it was stashed away", b, err)
	}
}

// The done markers an import leaves on the destination (so a resent import
// answers again instead of importing into the changed checkout) were never
// deleted: one a session moved, for ever. A session's go once it is
// assigned there (the move committed); those no assignment settles (a
// rolled-back move's) and bundles a crash left go after a day.
func TestImportDoneMarkersDoNotPileUp(t *testing.T) {
	laptopRoot, linuxRoot := t.TempDir(), t.TempDir()
	repo := filepath.Join(laptopRoot, "repo")
	dirtyRepo(t, repo)
	cp := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, cp.Addr())
	testharness.StartNode(t, cp.Addr(), "laptop", nil)
	var moves string
	// Read in name order: "fresh" ones sort first, so once the stale ones
	// are gone the fresh ones were looked at too.
	files := []struct {
		name  string
		age   time.Duration
		stays bool
	}{
		{"a0-fresh.imported", time.Hour, true},
		{"a1-fresh.bundle", time.Hour, true},
		{"m9-rolledback.imported", 25 * time.Hour, false},
		{"m9-crashed.in.bundle", 25 * time.Hour, false},
	}
	testharness.StartNode(t, cp.Addr(), "linux-1", func(cfg *node.Config) {
		pm, err := treemove.ParsePathMap([]string{laptopRoot + "=" + linuxRoot})
		if err != nil {
			t.Fatal(err)
		}
		cfg.PathMap = pm
		moves = filepath.Join(cfg.DataDir, "moves")
		if err := os.MkdirAll(moves, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			p := filepath.Join(moves, f.name)
			writeIn(t, moves, f.name, "")
			if err := os.Chtimes(p, time.Now().Add(-f.age), time.Now().Add(-f.age)); err != nil {
				t.Fatal(err)
			}
		}
	})
	testharness.WaitConnected(t, c, "laptop", true)
	testharness.WaitConnected(t, c, "linux-1", true)
	sess, m := moveFromLaptop(t, c, repo, &castv1.StartMigrationRequest{To: "linux-1"})
	awaitSucceeded(t, c, m.Id)
	gone := func(name string) bool {
		_, err := os.Stat(filepath.Join(moves, name))
		return os.IsNotExist(err)
	}
	testharness.WaitFor(t, 30*time.Second, "the moved session's import marker gone", func() bool { return gone(m.Id + "-" + sess.Id + ".imported") })
	for _, f := range files {
		if !f.stays {
			testharness.WaitFor(t, 30*time.Second, f.name+" gone", func() bool { return gone(f.name) })
		}
	}
	for _, f := range files {
		if f.stays && gone(f.name) {
			t.Errorf("%s, %s old, was dropped", f.name, f.age)
		}
	}
}

// A control plane whose store is restored from a backup taken before the
// node ran a message (docs/operations.md, "Backup and restore") gives the
// next message the seq the node had already delivered: the node counted
// it as delivered and it never reached a model. Through the real control
// plane, its embedded etcd restored from a copy of its data dir, and a
// real node running the pinned Claude: the message sent after the restore
// runs, once, on the restored history (the message the restore lost is
// not in it).
func TestMessageSentAfterAStoreRestoreRuns(t *testing.T) {
	fm := fakemodel.Start(t)
	addr, etcdDir := testharness.FreeAddr(t), filepath.Join(t.TempDir(), "etcd")
	start := func() *controlplane.Server {
		return testharness.StartControlPlane(t, func(c *controlplane.Config) { c.DataDir, c.Listen = etcdDir, addr })
	}
	cp := start()
	home, env := agenttest.NodeEnv(t, "claude", fm.URL)
	testharness.StartNode(t, addr, "laptop", func(cfg *node.Config) {
		cfg.IsolatedHomes = true
		cfg.Agents = map[string]node.AgentSetup{"claude": {Bin: agenttest.Bin(t, "claude"), Home: home, Env: env}}
	})
	c := testharness.Dial(t, addr)
	testharness.WaitConnected(t, c, "laptop", true)
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Node: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	ran := func(text string) int64 {
		t.Helper()
		m, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: text})
		if err != nil {
			t.Fatal(err)
		}
		delivered(t, c, sess.Id, m.Message.Seq)
		return m.Message.Seq
	}
	ran("first question")

	// The backup: the store as of now, copied while its control plane is
	// stopped.
	cp.Stop()
	backup := filepath.Join(t.TempDir(), "etcd")
	copyDir(t, etcdDir, backup)
	cp = start()
	lost := ran("second question")

	// The restore.
	cp.Stop()
	if err := os.RemoveAll(etcdDir); err != nil {
		t.Fatal(err)
	}
	copyDir(t, backup, etcdDir)
	start()
	testharness.WaitConnected(t, c, "laptop", true)
	turns := len(fm.Turns())
	if seq := ran("third question"); seq > lost {
		t.Fatalf("the restored store gave the next message seq %d, past the lost one's %d: no restore was staged", seq, lost)
	}
	all := fm.Turns()
	if len(all) <= turns {
		t.Fatal("no model request after the restore")
	}
	users := strings.Join(node.UserTexts(all[len(all)-1]), "\n")
	for q, want := range map[string]int{"first question": 1, "second question": 0, "third question": 1} {
		if n := strings.Count(users, q); n != want {
			t.Fatalf("the model's request holds %q %d times, want %d; user items %q", q, n, want, users)
		}
	}
}

// delivered waits until the session's delivery cursor reaches seq and it
// is idle: the message ran.
func delivered(t *testing.T, c *client.Client, id string, seq int64) {
	t.Helper()
	testharness.WaitFor(t, 90*time.Second, "the message delivered", func() bool {
		s, err := c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{SessionId: id})
		return err == nil && s.DeliveredSeq >= seq && s.State == castv1.SessionState_SESSION_STATE_IDLE
	})
}

// copyDir copies the folder from to to as a file backup does, modes
// kept (the control plane refuses a readable etcd root password).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v\n%s", from, to, err, out)
	}
}

// The source reads "the control plane kept an earlier upload" from a
// stored size of 0. An empty checkout (one commit, no files, nothing
// uncommitted) must not read as that: its bundle still holds git's
// header, refs and commit, so the upload is stored, the note says so, and
// a resent export keeps it.
func TestEmptyCheckoutsExportIsStored(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.name", "t"}, {"config", "user.email", "t@cast.invalid"},
		{"commit", "-q", "--allow-empty", "-m", "empty"}} {
		gitIn(t, repo, args...)
	}
	cp := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, cp.Addr())
	var data string
	testharness.StartNodeDaemon(t, cp.Addr(), "laptop", func(cfg *node.Config) { data = cfg.DataDir })
	dst := standInNode(t, c, "dst")
	testharness.WaitConnected(t, c, "laptop", true)
	testharness.WaitConnected(t, c, "dst", true)
	sess, m := moveFromLaptop(t, c, repo, &castv1.StartMigrationRequest{To: "dst", CleanSource: true})
	awaitCommand(t, dst, func(cmd *castv1.Command) bool { return cmd.GetImportWorkTree().GetSessionId() == sess.Id })
	// The import is asked once the upload is stored; the source marks its
	// note when the upload's answer reaches it, maybe a moment later.
	var n struct {
		Migration string `json:"migration"`
		Stored    bool   `json:"stored"`
	}
	testharness.WaitFor(t, time.Minute, "the note of an empty checkout's export stored (or dropped)", func() bool {
		b, err := os.ReadFile(filepath.Join(data, "moves", sess.Id+".clean.json"))
		if err != nil || json.Unmarshal(b, &n) != nil {
			n.Stored = false
			return true
		}
		return n.Stored
	})
	if !n.Stored || n.Migration != m.Id {
		t.Fatalf("note %+v: want migration %s stored; the source took the empty checkout's upload for one the control plane did not store", n, m.Id)
	}
}
