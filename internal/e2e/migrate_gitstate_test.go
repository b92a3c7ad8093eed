package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// gitIn is gitOut trimmed of its last newline.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return strings.TrimRight(gitOut(t, dir, args...), "\n")
}

// gitStateCheckout clones a bare origin into dir, commits once ahead of
// origin/main, stashes twice, stages a change and a new file and leaves an
// unstaged change and an untracked file.
func gitStateCheckout(t *testing.T, dir string) {
	t.Helper()
	origin := filepath.Join(t.TempDir(), "origin.git")
	gitIn(t, t.TempDir(), "init", "-q", "--bare", "-b", "main", origin)
	gitIn(t, filepath.Dir(dir), "clone", "-q", origin, dir)
	gitIn(t, dir, "config", "user.name", "t")
	gitIn(t, dir, "config", "user.email", "t@cast.invalid")
	put := func(name, body string) { must(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)) }
	put("app.txt", "v1\n")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "v1")
	gitIn(t, dir, "push", "-q", "origin", "main")
	gitIn(t, dir, "branch", "-q", "--set-upstream-to=origin/main")
	put("ahead.txt", "ahead\n")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "ahead")
	put("app.txt", "stashed\n")
	gitIn(t, dir, "stash", "push", "-q", "-m", "an idea for later")
	put("app.txt", "v2 staged\n")
	put("new.txt", "staged new file\n")
	gitIn(t, dir, "add", "app.txt", "new.txt")
	put("ahead.txt", "unstaged\n")
	put("scratch.txt", "untracked\n")
}

// A migration carries the whole git state: staged stays staged, the
// branch still tracks origin/main with its ahead count (no fetch), and the
// stash arrives. With --clean-source the source is left clean, its changes
// in a stash entry saying where they went; without it the CLI says the
// source keeps its copy.
func TestMigrateCarriesGitState(t *testing.T) {
	t.Setenv("GIT_OPTIONAL_LOCKS", "0") // the test's status polls must not take the node's index lock
	r := newMigRig(t, migOpts{}, "codex")
	ctx := context.Background()
	laptop, linux := filepath.Join(r.roots["laptop"], "app"), filepath.Join(r.roots["linux"], "app")
	gitStateCheckout(t, laptop)
	status := func(dir string) string {
		return gitIn(t, dir, "status", "--porcelain", "--branch", "--untracked-files=all")
	}
	stashes := func(dir string) string { return gitIn(t, dir, "stash", "list", "--format=%gs") }
	want := status(laptop)
	if want != "## main...origin/main [ahead 1]\n M ahead.txt\nM  app.txt\nA  new.txt\n?? scratch.txt" {
		t.Fatalf("the source checkout is not what the test builds:\n%s", want)
	}
	s, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", Cwd: laptop, Node: "laptop"})
	if err != nil {
		t.Fatal(err)
	}

	out, errOut, code := r.cast.run("migrate", "start", "--to", "linux", "--clean-source", s.Id)
	if code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("cast migrate start --clean-source: exit %d\n%s\n%s", code, out, errOut)
	}
	list, err := r.c.Migrations.ListMigrations(ctx, &castv1.ListMigrationsRequest{})
	if err != nil || len(list.Migrations) != 1 {
		t.Fatalf("list migrations: %v %v", err, list)
	}
	mig := list.Migrations[0].Id
	note := "source " + laptop + " on laptop: left clean once released; its uncommitted changes are in a stash entry there (\"cast: moved to linux by migration " + mig + "\"; git stash list)"
	if !strings.Contains(errOut, note) {
		t.Errorf("cast migrate start --clean-source said:\n%s\nwant the line:\n%s", errOut, note)
	}
	if got := status(linux); got != want {
		t.Errorf("git status on linux:\n%s\nwant:\n%s", got, want)
	}
	if got := stashes(linux); got != "On main: an idea for later" {
		t.Errorf("stash on linux: %q", got)
	}
	testharness.WaitFor(t, time.Minute, "laptop's checkout stashed clean", func() bool {
		return status(laptop) == "## main...origin/main [ahead 1]"
	})
	if got := stashes(laptop); got != "On main: cast: moved to linux by migration "+mig+"\nOn main: an idea for later" {
		t.Errorf("stash on laptop after the move:\n%s", got)
	}

	// On without the flag (laptop maps no path, so the session keeps
	// linux's path on this one filesystem): linux keeps its copy, as the
	// CLI says.
	out, errOut, code = r.cast.run("migrate", "start", "--to", "laptop", s.Id)
	if code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("cast migrate start back: exit %d\n%s\n%s", code, out, errOut)
	}
	if note := "source " + linux + " on linux keeps its own copy of the uncommitted changes (the destination has them too); --clean-source stashes them there instead"; !strings.Contains(errOut, note) {
		t.Errorf("cast migrate start said:\n%s\nwant the line:\n%s", errOut, note)
	}
	if got := status(linux); got != want {
		t.Errorf("linux's copy after moving away without --clean-source:\n%s\nwant:\n%s", got, want)
	}
}
