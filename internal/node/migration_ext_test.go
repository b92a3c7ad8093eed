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

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
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
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: repo, Node: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "dst", SessionIds: []string{sess.Id}, CleanSource: true})
	if err != nil {
		t.Fatal(err)
	}
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
	testharness.WaitFor(t, 3*time.Minute, "the migration to end", func() bool {
		got, err := c.Migrations.GetMigration(ctx, &castv1.GetMigrationRequest{Id: m.Id})
		if err != nil {
			t.Fatal(err)
		}
		m = got
		s := m.State
		return s == castv1.MigrationState_MIGRATION_STATE_SUCCEEDED || s == castv1.MigrationState_MIGRATION_STATE_FAILED ||
			s == castv1.MigrationState_MIGRATION_STATE_CANCELLED
	})
	if m.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		t.Fatalf("migration %v: %s", m.State, m.Sessions[0].Reason)
	}
	// The release reads the note and drops it: the checkout is settled.
	testharness.WaitFor(t, time.Minute, "the clean-source note gone", func() bool {
		_, err := os.Stat(note)
		return os.IsNotExist(err)
	})
	if b, err := os.ReadFile(filepath.Join(repo, "later.txt")); err != nil || !strings.Contains(string(b), "after the export") {
		t.Errorf("later.txt, which never moved, after the release: %q, %v; it was stashed away", b, err)
	}
}
