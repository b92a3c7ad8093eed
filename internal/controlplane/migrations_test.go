package controlplane_test

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/treemove"
)

// gitRepo makes a repository with one commit, then an uncommitted change
// and an untracked file. Git runs with a private HOME.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	run := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run("init", "-q", "-b", "main")
	run("config", "user.name", "t")
	run("config", "user.email", "t@cast.invalid")
	writeFile(t, filepath.Join(dir, "main.go"), "package main\n")
	run("add", "-A")
	run("commit", "-q", "-m", "first")
	writeFile(t, filepath.Join(dir, "main.go"), "package main\n\n// uncommitted\n")
	writeFile(t, filepath.Join(dir, "notes.txt"), "untracked\n")
}

func writeFile(t *testing.T, p, body string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func isolateGit(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
}

// waitMigration polls until the migration ends (git work trees move in
// it: minutes on a loaded machine, at most).
func waitMigration(t *testing.T, c *client.Client, id string) *castv1.Migration {
	t.Helper()
	var m *castv1.Migration
	testharness.WaitFor(t, 3*time.Minute, "migration "+id+" to end", func() bool {
		var err error
		m, err = c.Migrations.GetMigration(ctxT(t), &castv1.GetMigrationRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		s := m.State
		return s == castv1.MigrationState_MIGRATION_STATE_SUCCEEDED || s == castv1.MigrationState_MIGRATION_STATE_FAILED ||
			s == castv1.MigrationState_MIGRATION_STATE_CANCELLED
	})
	return m
}

func twoNodes(t *testing.T, laptopRoot, linuxRoot string) *client.Client {
	return twoNodesWith(t, laptopRoot, linuxRoot, nil)
}

// twoNodesWith is twoNodes with laptop's configuration passed to cb too.
func twoNodesWith(t *testing.T, laptopRoot, linuxRoot string, cb func(*node.Config)) *client.Client {
	return twoNodesOn(t, nil, laptopRoot, linuxRoot, cb)
}

// twoNodesOn is twoNodesWith under a control plane configured by cpcb.
func twoNodesOn(t *testing.T, cpcb func(*controlplane.Config), laptopRoot, linuxRoot string, cb func(*node.Config)) *client.Client {
	cp := testharness.StartControlPlane(t, cpcb)
	c := testharness.Dial(t, cp.Addr())
	testharness.StartNode(t, cp.Addr(), "laptop", func(cfg *node.Config) {
		cfg.Labels = []string{"laptop"}
		if cb != nil {
			cb(cfg)
		}
	})
	testharness.StartNode(t, cp.Addr(), "linux-1", func(cfg *node.Config) {
		cfg.Labels = []string{"linux"}
		pm, err := treemove.ParsePathMap([]string{laptopRoot + "=" + linuxRoot})
		if err != nil {
			t.Fatal(err)
		}
		cfg.PathMap = pm
	})
	testharness.WaitFor(t, 20*time.Second, "both nodes connected", func() bool {
		resp, err := c.Nodes.ListNodes(ctxT(t), &castv1.ListNodesRequest{})
		n := 0
		for _, node := range resp.GetNodes() {
			if node.Connected {
				n++
			}
		}
		return err == nil && n == 2
	})
	return c
}

// Idle sessions move by label: owner, cwd (mapped), work tree with its
// uncommitted and untracked changes, and the moved notice in one commit.
func TestMigrateIdleSessionsByLabel(t *testing.T) {
	isolateGit(t)
	laptopRoot, linuxRoot := t.TempDir(), t.TempDir()
	repo := filepath.Join(laptopRoot, "repo")
	gitRepo(t, repo)
	if out, err := exec.Command("git", "-C", repo, "remote", "add", "origin", "git@example.com:team/app.git").CombinedOutput(); err != nil {
		t.Fatalf("git remote add: %v %s", err, out)
	}
	c := twoNodes(t, laptopRoot, linuxRoot)
	ctx := ctxT(t)
	var sids []string
	for range 2 { // two sessions sharing one checkout
		sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: repo, Node: "laptop"})
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, sess.Id)
	}
	m, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "linux", SessionIds: sids, RequestId: "move-1"})
	if err != nil {
		t.Fatal(err)
	}
	if m.TargetNode != "linux-1" {
		t.Fatalf("target = %q, want linux-1 (by label)", m.TargetNode)
	}
	again, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "linux", SessionIds: sids, RequestId: "move-1"})
	if err != nil || again.Id != m.Id {
		t.Fatalf("retry with the same request id: %v, id %s want %s", err, again.GetId(), m.Id)
	}
	m = waitMigration(t, c, m.Id)
	if m.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		t.Fatalf("migration = %v: %s %v", m.State, m.Reason, m.Sessions)
	}
	dest := filepath.Join(linuxRoot, "repo")
	for _, id := range sids {
		sess, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		if sess.Node != "linux-1" || sess.Cwd != dest || sess.FencedBy != "" {
			t.Errorf("session %s: node %q cwd %q fenced %q; want linux-1 %s unfenced", id, sess.Node, sess.Cwd, sess.FencedBy, dest)
		}
		msgs, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: id})
		if err != nil || len(msgs.Messages) != 1 {
			t.Fatalf("transcript: %v %v", err, msgs.GetMessages())
		}
		n := msgs.Messages[0]
		want := "This session just moved to a different machine. It now runs on linux-1 in " + dest + " (previously laptop)."
		if n.Kind != castv1.MessageKind_MESSAGE_KIND_NOTICE || !strings.HasPrefix(n.Text, want) {
			t.Errorf("notice = %v %q, want prefix %q", n.Kind, n.Text, want)
		}
	}
	for name, want := range map[string]string{"main.go": "package main\n\n// uncommitted\n", "notes.txt": "untracked\n"} {
		got, err := os.ReadFile(filepath.Join(dest, name))
		if err != nil || string(got) != want {
			t.Errorf("%s on the destination = %q, %v; want %q", name, got, err, want)
		}
	}
	if out, err := exec.Command("git", "-C", dest, "remote", "get-url", "origin").Output(); err != nil || strings.TrimSpace(string(out)) != "git@example.com:team/app.git" {
		t.Errorf("the destination's origin = %q, %v; want the source's remote", out, err)
	}
	// Cancelling a finished migration says so.
	_, err = c.Migrations.CancelMigration(ctx, &castv1.CancelMigrationRequest{Id: m.Id})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("cancel of a finished migration: %v, want FailedPrecondition", err)
	}
}

// A work tree that cannot travel rolls the session back before anything
// moves: same owner, fence lifted, the reason in the record.
func TestMigrateRefusesNonGitWorkTree(t *testing.T) {
	isolateGit(t)
	laptopRoot, linuxRoot := t.TempDir(), t.TempDir()
	plain := filepath.Join(laptopRoot, "plain")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	c := twoNodes(t, laptopRoot, linuxRoot)
	ctx := ctxT(t)
	sess, m := startMove(ctx, t, c, "claude", "laptop", plain, "linux-1")
	m = waitMigration(t, c, m.Id)
	if m.State != castv1.MigrationState_MIGRATION_STATE_FAILED || !strings.Contains(m.Sessions[0].Reason, "not movable") {
		t.Fatalf("migration = %v, session reason %q; want failed, not movable", m.State, m.Sessions[0].Reason)
	}
	got, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
	if err != nil || got.Node != "laptop" || got.FencedBy != "" || got.Cwd != plain {
		t.Fatalf("after rollback: %v node %q fenced %q cwd %q", err, got.GetNode(), got.GetFencedBy(), got.GetCwd())
	}
}

func TestMigrateRequestErrors(t *testing.T) {
	t.Parallel()
	c := twoNodes(t, t.TempDir(), t.TempDir())
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		req    *castv1.StartMigrationRequest
		code   codes.Code
		reason string
	}{
		{"no selection", &castv1.StartMigrationRequest{To: "linux"}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"two selections", &castv1.StartMigrationRequest{To: "linux", All: true, FromNode: "laptop"}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"no destination", &castv1.StartMigrationRequest{SessionIds: []string{sess.Id}}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"bad destination name", &castv1.StartMigrationRequest{To: "../x", SessionIds: []string{sess.Id}}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"unknown destination", &castv1.StartMigrationRequest{To: "mars", SessionIds: []string{sess.Id}}, codes.FailedPrecondition, "NO_NODE_AVAILABLE"},
		{"already there", &castv1.StartMigrationRequest{To: "laptop", SessionIds: []string{sess.Id}}, codes.FailedPrecondition, "ALREADY_ON_TARGET"},
		{"unknown session", &castv1.StartMigrationRequest{To: "linux", SessionIds: []string{"zzzzzzz"}}, codes.NotFound, "NOT_FOUND"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Migrations.StartMigration(ctx, tc.req)
			if status.Code(err) != tc.code || client.ReasonOf(err) != tc.reason {
				t.Fatalf("err = %v (reason %q), want %v %s", err, client.ReasonOf(err), tc.code, tc.reason)
			}
		})
	}
}

// A request id reused for another migration is refused: the start used to
// answer with the first migration, so a script that reused an id was told
// its other sessions were moving while nothing moved them.
func TestMigrateRequestIDReusedForAnotherMigration(t *testing.T) {
	t.Parallel()
	c := twoNodes(t, t.TempDir(), t.TempDir())
	ctx := ctxT(t)
	var sids []string
	for range 2 {
		sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "laptop"})
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, sess.Id)
	}
	first := &castv1.StartMigrationRequest{To: "linux", SessionIds: sids[:1], SkipWorktree: true, RequestId: "move-1"}
	m, err := c.Migrations.StartMigration(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.Migrations.StartMigration(ctx, first); err != nil || again.Id != m.Id {
		t.Fatalf("retry with the same request id: %v, id %s want %s", err, again.GetId(), m.Id)
	}
	for _, tc := range []struct {
		name string
		req  *castv1.StartMigrationRequest
	}{
		{"another session", &castv1.StartMigrationRequest{To: "linux", SessionIds: sids[1:], SkipWorktree: true, RequestId: "move-1"}},
		{"one more session", &castv1.StartMigrationRequest{To: "linux", SessionIds: sids, SkipWorktree: true, RequestId: "move-1"}},
		{"another destination", &castv1.StartMigrationRequest{To: "linux-1", SessionIds: sids[:1], SkipWorktree: true, RequestId: "move-1"}},
		{"with the work tree", &castv1.StartMigrationRequest{To: "linux", SessionIds: sids[:1], RequestId: "move-1"}},
		{"a node's sessions", &castv1.StartMigrationRequest{To: "linux", FromNode: "laptop", SkipWorktree: true, RequestId: "move-1"}},
		{"every session", &castv1.StartMigrationRequest{To: "linux", All: true, SkipWorktree: true, RequestId: "move-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Migrations.StartMigration(ctx, tc.req)
			if status.Code(err) != codes.AlreadyExists || client.ReasonOf(err) != errs.ReasonClientIDReused {
				t.Fatalf("got %v, %v (reason %q); want ALREADY_EXISTS %s", got.GetId(), err, client.ReasonOf(err), errs.ReasonClientIDReused)
			}
		})
	}
	sess, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sids[1]})
	if err != nil || sess.FencedBy != "" || sess.Node != "laptop" {
		t.Fatalf("the session no migration took: %v fenced by %q on %s", err, sess.GetFencedBy(), sess.GetNode())
	}
}

// While a migration waits for a running turn: the session is fenced, a
// second migration of it is FAILED_PRECONDITION (SESSION_FENCED), messages are still accepted, no new
// turn may start (SESSION_FENCED), the owner gets an abandon interrupt when
// --wait runs out, and a cancel rolls it back (fence lifted, owner kept).
// Once the turn is over, a new migration commits.
// srcAndDst starts a control plane with two raw nodes, src (whose
// commands it returns) and dst (which answers every skipped import).
func srcAndDst(t *testing.T) (*client.Client, <-chan *castv1.Command) {
	cp := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, cp.Addr())
	src := rawNode(t, c, "src")
	dst := rawNode(t, c, "dst")
	go answerImports(c, dst, "dst")
	waitConnected(t, c, "src", true)
	waitConnected(t, c, "dst", true)
	return c, src
}

func TestMigrateFenceWaitAndCancel(t *testing.T) {
	t.Parallel()
	c, src := srcAndDst(t)
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", Node: "src"})
	if err != nil {
		t.Fatal(err)
	}
	token := nextCommand(t, src, func(cmd *castv1.Command) bool { return cmd.GetAssignSession().GetSession().GetId() == sess.Id }).GetAssignSession().OwnerToken
	report := func(st castv1.SessionState) error {
		_, err := c.Nodes.ReportTurn(ctx, &castv1.ReportTurnRequest{SessionId: sess.Id, Node: "src", OwnerToken: token, State: st})
		return err
	}
	if err := report(castv1.SessionState_SESSION_STATE_RUNNING); err != nil {
		t.Fatal(err)
	}
	m, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "dst", SessionIds: []string{sess.Id},
		Wait: durationpb.New(time.Second), SkipWorktree: true})
	if err != nil {
		t.Fatal(err)
	}
	testharness.WaitFor(t, 10*time.Second, "session fenced", func() bool {
		s, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
		return err == nil && s.FencedBy == m.Id
	})
	_, err = c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "dst", SessionIds: []string{sess.Id}})
	if status.Code(err) != codes.FailedPrecondition || client.ReasonOf(err) != "SESSION_FENCED" {
		t.Fatalf("second migration: %v, want FAILED_PRECONDITION SESSION_FENCED", err)
	}
	if _, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: "held"}); err != nil {
		t.Fatalf("a message to a fenced session must be accepted: %v", err)
	}
	if err := report(castv1.SessionState_SESSION_STATE_RUNNING); client.ReasonOf(err) != "SESSION_FENCED" {
		t.Fatalf("turn start while fenced: %v, want SESSION_FENCED", err)
	}
	nextCommand(t, src, func(cmd *castv1.Command) bool {
		return cmd.GetInterrupt().GetSessionId() == sess.Id && cmd.GetInterrupt().GetAbandon()
	})
	if _, err := c.Migrations.CancelMigration(ctx, &castv1.CancelMigrationRequest{Id: m.Id}); err != nil {
		t.Fatal(err)
	}
	if m = waitMigration(t, c, m.Id); m.State != castv1.MigrationState_MIGRATION_STATE_CANCELLED || m.Sessions[0].State != castv1.MigrationState_MIGRATION_STATE_CANCELLED {
		t.Fatalf("after cancel: %v / %v", m.State, m.Sessions[0].State)
	}
	got, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
	if err != nil || got.Node != "src" || got.FencedBy != "" {
		t.Fatalf("after cancel: %v node %q fenced %q", err, got.GetNode(), got.GetFencedBy())
	}
	// The turn ends (the node obeyed the interrupt); now the move commits.
	if err := report(castv1.SessionState_SESSION_STATE_IDLE); err != nil {
		t.Fatal(err)
	}
	m, err = c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "dst", SessionIds: []string{sess.Id}, SkipWorktree: true})
	if err != nil {
		t.Fatal(err)
	}
	if m = waitMigration(t, c, m.Id); m.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		t.Fatalf("second move: %v %s", m.State, m.Sessions[0].Reason)
	}
	nextCommand(t, src, func(cmd *castv1.Command) bool { return cmd.GetReleaseSession().GetSessionId() == sess.Id })
	if err := report(castv1.SessionState_SESSION_STATE_RUNNING); client.ReasonOf(err) != "NOT_OWNER" {
		t.Fatalf("the old owner's turn start: %v, want NOT_OWNER", err)
	}
}

// A session started in a subdirectory of a checkout moves with the whole
// work tree, and lands in the same subdirectory of the destination's
// checkout: the files it sees around its cwd are the ones it saw before.
func TestMigrateSessionInSubdirectory(t *testing.T) {
	isolateGit(t)
	laptopRoot, linuxRoot := t.TempDir(), t.TempDir()
	repo := filepath.Join(laptopRoot, "repo")
	gitRepo(t, repo)
	sub := filepath.Join(repo, "pkg")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(sub, "lib.go"), "package pkg\n")
	c := twoNodes(t, laptopRoot, linuxRoot)
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: sub, Node: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "linux-1", SessionIds: []string{sess.Id}})
	if err != nil {
		t.Fatal(err)
	}
	if m = waitMigration(t, c, m.Id); m.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		t.Fatalf("migration = %v: %s", m.State, m.Sessions[0].Reason)
	}
	got, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
	if err != nil {
		t.Fatal(err)
	}
	wantCwd := filepath.Join(linuxRoot, "repo", "pkg")
	if got.Cwd != wantCwd {
		t.Errorf("cwd after the move = %q, want %q", got.Cwd, wantCwd)
	}
	for rel, want := range map[string]string{"pkg/lib.go": "package pkg\n", "main.go": "package main\n\n// uncommitted\n", "notes.txt": "untracked\n"} {
		b, err := os.ReadFile(filepath.Join(linuxRoot, "repo", rel))
		if err != nil || string(b) != want {
			t.Errorf("%s in the destination checkout = %q, %v; want %q", rel, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(wantCwd, "pkg")); err == nil {
		t.Errorf("the whole checkout was laid down inside the session's subdirectory %s", wantCwd)
	}
}

// A source whose stream drops mid-turn (a network blip) has not stopped
// its agent: it does that by itself only after ¾ of its lease without
// the control plane. Its connection key goes at once (the replica revokes
// the lease), but a drain must not take that for a lapsed lease and
// commit the move while the turn may still run there: the destination
// would run the same prompt beside it.
func TestMigrateDrainDoesNotForceBlippedSource(t *testing.T) {
	t.Parallel()
	cp := testharness.StartControlPlane(t, testharness.ShortLease)
	c := testharness.Dial(t, cp.Addr())
	src := connectNode(t, ctxT(t), c, "src", nil)
	srcCmds := commandsOf(src)
	_, m := drainingMove(t, c, srcCmds)
	src.close()
	dropped := time.Now()
	m = waitMigration(t, c, m.Id)
	// The node stops its agents after ¾ of its lease without the control
	// plane (2s here): a move committed before then may run beside it.
	if margin := 2 * time.Second * 3 / 4; m.State == castv1.MigrationState_MIGRATION_STATE_SUCCEEDED && time.Since(dropped) < margin {
		t.Fatalf("the move of a session mid-turn committed %s after its source's stream dropped, before the source stops its agent by itself (%s)",
			time.Since(dropped).Round(time.Millisecond), margin)
	}
}

// answerImports answers the (skipped) work tree step of every migration
// into node, as a node does, from its command stream cmds.
func answerImports(c *client.Client, cmds <-chan *castv1.Command, node string) {
	for cmd := range cmds {
		if imp := cmd.GetImportWorkTree(); imp != nil {
			_, _ = c.Nodes.ReportWorkTree(context.Background(), &castv1.ReportWorkTreeRequest{MigrationId: imp.MigrationId,
				SessionId: imp.SessionId, Node: node, Phase: "import"})
		}
	}
}

// A work tree over the relay's bound is refused as soon as the upload
// passes it: the move fails saying so. The source read that refusal as
// the end of its upload stream and reported "EOF" instead, which tells
// no one what to do.
func TestOversizedWorkTreeSaysWhy(t *testing.T) {
	isolateGit(t)
	laptopRoot, linuxRoot := t.TempDir(), t.TempDir()
	repo := filepath.Join(laptopRoot, "repo")
	gitRepo(t, repo)
	big := make([]byte, 4<<20) // incompressible: the bundle is as large
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(repo, "big.bin"), string(big))
	c := twoNodesOn(t, func(cfg *controlplane.Config) { cfg.MaxWorkTreeBytes = 1 << 20 }, laptopRoot, linuxRoot, nil)
	ctx := ctxT(t)
	_, m := startMove(ctx, t, c, "claude", "laptop", repo, "linux-1")
	m = waitMigration(t, c, m.Id)
	if m.State != castv1.MigrationState_MIGRATION_STATE_FAILED || !strings.Contains(m.Sessions[0].Reason, "over 1 MiB") {
		t.Fatalf("migration %v: %q; want FAILED saying the work tree is over 1 MiB", m.State, m.Sessions[0].Reason)
	}
}

// startMove creates a session of agent on node from in cwd and starts its
// migration, work tree included, to node to.
func startMove(ctx context.Context, t *testing.T, c *client.Client, agent, from, cwd, to string) (*castv1.Session, *castv1.Migration) {
	t.Helper()
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: agent, Node: from, Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: to, SessionIds: []string{sess.Id}})
	if err != nil {
		t.Fatal(err)
	}
	return sess, m
}

// An export still running when its migration is cancelled uploads later:
// nothing deletes a work tree stored after the rollback did, so each such
// upload (up to 64 MiB) would stay in etcd for good. A migration whose
// move of the session ended takes no upload, and nothing is served.
func TestWorkTreeUploadAfterCancelIsRefused(t *testing.T) {
	t.Parallel()
	c, src := srcAndDst(t)
	ctx := ctxT(t)
	sess, m := startMove(ctx, t, c, "codex", "src", "/srv/repo", "dst")
	// The source is asked for its work tree; it is slow, and the person
	// cancels meanwhile.
	nextCommand(t, src, func(cmd *castv1.Command) bool { return cmd.GetExportWorkTree().GetSessionId() == sess.Id })
	if _, err := c.Migrations.CancelMigration(ctx, &castv1.CancelMigrationRequest{Id: m.Id}); err != nil {
		t.Fatal(err)
	}
	if m = waitMigration(t, c, m.Id); m.State != castv1.MigrationState_MIGRATION_STATE_CANCELLED {
		t.Fatalf("after cancel: %v", m.State)
	}
	up, err := c.Nodes.UploadWorkTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Send(&castv1.UploadWorkTreeRequest{MigrationId: m.Id, SessionId: sess.Id, Node: "src",
		Chunk: []byte("bundle bytes"), ManifestJson: `{"commit":"x"}`}); err != nil {
		t.Fatal(err)
	}
	if _, err := up.CloseAndRecv(); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("upload for a cancelled migration: %v, want FAILED_PRECONDITION", err)
	}
	down, err := c.Nodes.DownloadWorkTree(ctx, &castv1.DownloadWorkTreeRequest{MigrationId: m.Id, SessionId: sess.Id, Node: "dst"})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := down.Recv(); err == nil {
		t.Errorf("the cancelled migration's work tree is still stored and served (%d bytes)", len(resp.Chunk))
	}
}

// The migration resends an export the source has not answered yet; a
// resend that reaches the source just after its first export finished
// exported and uploaded again, and that upload deleted and replaced the
// stored tree while the destination was downloading it (the import then
// failed and the move rolled back). An upload for an export already done
// keeps the tree stored.
func TestResentExportDoesNotReplaceTheTreeBeingRead(t *testing.T) {
	t.Parallel()
	cp := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, cp.Addr())
	src, dst := rawNode(t, c, "src"), rawNode(t, c, "dst")
	waitConnected(t, c, "src", true)
	waitConnected(t, c, "dst", true)
	ctx := ctxT(t)
	sess, m := startMove(ctx, t, c, "codex", "src", "/srv/repo", "dst")
	upload := func(bundle, manifest string) {
		t.Helper()
		up, err := c.Nodes.UploadWorkTree(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := up.Send(&castv1.UploadWorkTreeRequest{MigrationId: m.Id, SessionId: sess.Id, Node: "src",
			Chunk: []byte(bundle), ManifestJson: manifest}); err != nil {
			t.Fatal(err)
		}
		if _, err := up.CloseAndRecv(); err != nil {
			t.Fatalf("upload of %q: %v", bundle, err)
		}
	}
	nextCommand(t, src, func(cmd *castv1.Command) bool { return cmd.GetExportWorkTree().GetSessionId() == sess.Id })
	upload("first bundle", `{"commit":"a"}`)
	nextCommand(t, dst, func(cmd *castv1.Command) bool { return cmd.GetImportWorkTree().GetSessionId() == sess.Id })
	upload("second bundle", `{"commit":"b"}`) // the resent export, while the destination reads
	down, err := c.Nodes.DownloadWorkTree(ctx, &castv1.DownloadWorkTreeRequest{MigrationId: m.Id, SessionId: sess.Id, Node: "dst"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := down.Recv()
	if err != nil || string(resp.Chunk) != "first bundle" || resp.ManifestJson != `{"commit":"a"}` {
		t.Fatalf("download after a second upload: %q %q %v; want the first export's", resp.GetChunk(), resp.GetManifestJson(), err)
	}
	if _, err := c.Nodes.ReportWorkTree(ctx, &castv1.ReportWorkTreeRequest{MigrationId: m.Id, SessionId: sess.Id, Node: "dst",
		Phase: "import", Cwd: "/srv/repo"}); err != nil {
		t.Fatal(err)
	}
	if m = waitMigration(t, c, m.Id); m.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		t.Fatalf("migration %v: %s", m.State, m.Sessions[0].Reason)
	}
}

// A --clean-source migration that rolls back after the export leaves the
// export's note on the source. A later move of the session to the same
// node that did not ask for it (--skip-worktree: no export replaces the
// note) found that note at its release and stashed the source's changes
// away. The rollback's re-assignment, naming no fence of the note's
// migration, drops it.
func TestCleanSourceNoteOfARolledBackMigrationIsDropped(t *testing.T) {
	isolateGit(t)
	laptopRoot, linuxRoot := t.TempDir(), t.TempDir()
	repo := filepath.Join(laptopRoot, "repo")
	gitRepo(t, repo)
	// The destination's checkout has work of its own: the import fails.
	dest := filepath.Join(linuxRoot, "repo")
	gitRepo(t, dest)
	writeFile(t, filepath.Join(dest, "local.txt"), "the destination's own\n")
	var laptopData string
	c := twoNodesWith(t, laptopRoot, linuxRoot, func(cfg *node.Config) { laptopData = cfg.DataDir })
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: repo, Node: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "linux-1", SessionIds: []string{sess.Id}, CleanSource: true})
	if err != nil {
		t.Fatal(err)
	}
	if m = waitMigration(t, c, m.Id); m.State != castv1.MigrationState_MIGRATION_STATE_FAILED {
		t.Fatalf("move into a dirty checkout = %v: %s", m.State, m.Sessions[0].Reason)
	}
	m, err = c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "linux-1", SessionIds: []string{sess.Id}, SkipWorktree: true})
	if err != nil {
		t.Fatal(err)
	}
	if m = waitMigration(t, c, m.Id); m.State != castv1.MigrationState_MIGRATION_STATE_SUCCEEDED {
		t.Fatalf("second move = %v: %s", m.State, m.Sessions[0].Reason)
	}
	// The note goes once read (at the release, after any stash) or when
	// dropped: either way the source's checkout is settled then.
	note := filepath.Join(laptopData, "moves", sess.Id+".clean.json")
	testharness.WaitFor(t, 30*time.Second, "the clean-source note gone", func() bool {
		_, err := os.Stat(note)
		return os.IsNotExist(err)
	})
	if b, err := os.ReadFile(filepath.Join(repo, "main.go")); err != nil || string(b) != "package main\n\n// uncommitted\n" {
		t.Errorf("the source's uncommitted change after a move without --clean-source = %q, %v; it was stashed away", b, err)
	}
}

// drainingMove connects dst, starts a session on src (whose commands are
// srcCmds) with a turn running, and a move of it to dst that waits an
// hour for the turn; it returns once the session is fenced.
func drainingMove(t *testing.T, c *client.Client, srcCmds <-chan *castv1.Command) (*castv1.Session, *castv1.Migration) {
	t.Helper()
	dst := rawNode(t, c, "dst")
	go answerImports(c, dst, "dst")
	waitConnected(t, c, "src", true)
	waitConnected(t, c, "dst", true)
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", Node: "src"})
	if err != nil {
		t.Fatal(err)
	}
	token := nextCommand(t, srcCmds, func(cmd *castv1.Command) bool { return cmd.GetAssignSession().GetSession().GetId() == sess.Id }).GetAssignSession().OwnerToken
	if _, err := c.Nodes.ReportTurn(ctx, &castv1.ReportTurnRequest{SessionId: sess.Id, Node: "src", OwnerToken: token,
		State: castv1.SessionState_SESSION_STATE_RUNNING}); err != nil {
		t.Fatal(err)
	}
	m, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "dst", SessionIds: []string{sess.Id},
		Wait: durationpb.New(time.Hour), SkipWorktree: true})
	if err != nil {
		t.Fatal(err)
	}
	testharness.WaitFor(t, 10*time.Second, "session fenced", func() bool {
		s, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
		return err == nil && s.FencedBy == m.Id
	})
	return sess, m
}

// A drain looked for a cancel only at its wait's tick (or a change of the
// session): a cancel asked while the turn ran waited up to a tick before
// the move rolled back. It ends the drain at once: with a tick of an hour,
// the cancelled move is rolled back and the session unfenced.
func TestCancelEndsADrainAtOnce(t *testing.T) {
	t.Parallel()
	cp := testharness.StartControlPlane(t, func(cfg *controlplane.Config) { cfg.Migrate.Tick = time.Hour })
	c := testharness.Dial(t, cp.Addr())
	sess, m := drainingMove(t, c, rawNode(t, c, "src"))
	ctx := ctxT(t)
	if _, err := c.Migrations.CancelMigration(ctx, &castv1.CancelMigrationRequest{Id: m.Id}); err != nil {
		t.Fatal(err)
	}
	// Far less than the tick: the bound only keeps a broken run short.
	testharness.WaitFor(t, 30*time.Second, "the cancelled move rolled back", func() bool {
		m, err := c.Migrations.GetMigration(ctx, &castv1.GetMigrationRequest{Id: m.Id})
		return err == nil && m.State == castv1.MigrationState_MIGRATION_STATE_CANCELLED
	})
	if s, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id}); err != nil || s.FencedBy != "" || s.Node != "src" {
		t.Fatalf("after the cancel: %v, node %q, fenced by %q", err, s.GetNode(), s.GetFencedBy())
	}
}
