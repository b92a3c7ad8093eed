package treemove

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/git"
)

// roundTrip exports src, imports into dst and checks dst matches: HEAD,
// branch, files, the same changed paths, staged where they were staged,
// and the same stash entries.
func roundTrip(t *testing.T, src, dst string, ignored ...string) Manifest {
	t.Helper()
	ctx := context.Background()
	before := state(t, src)
	bundle := filepath.Join(t.TempDir(), "wt.bundle")
	m, err := Export(ctx, src, bundle)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	if after := state(t, src); after != before {
		t.Fatalf("Export changed the source:\nbefore %s\nafter %s", before, after)
	}
	if err := Import(ctx, bundle, dst, m); err != nil {
		t.Fatalf("Import: %v", err)
	}
	if got := gitT(t, dst, "rev-parse", "HEAD"); got != m.Commit {
		t.Errorf("dst HEAD = %s, want %s", got, m.Commit)
	}
	if got, _ := (repo{dir: dst}).branch(ctx); got != m.Branch {
		t.Errorf("dst branch = %q, want %q", got, m.Branch)
	}
	if want, got := files(t, src, ignored...), files(t, dst); !reflect.DeepEqual(got, want) {
		t.Errorf("dst files = %v, want %v", got, want)
	}
	if want, got := changed(t, src), changed(t, dst); !reflect.DeepEqual(got, want) {
		t.Errorf("dst changes = %v, want %v", got, want)
	}
	// The same staged and unstaged state, file by file (XY columns).
	if want, got := status(t, src), status(t, dst); got != want {
		t.Errorf("dst status:\n%s\nwant:\n%s", got, want)
	}
	if want, got := stashList(t, src), stashList(t, dst); got != want {
		t.Errorf("dst stash list:\n%s\nwant:\n%s", got, want)
	}
	if refs := gitT(t, dst, "for-each-ref", refPrefix); refs != "" {
		t.Errorf("dst keeps temporary refs: %s", refs)
	}
	return m
}

func TestRoundTrip(t *testing.T) {
	isolate(t)
	cases := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		ignored []string // files in src that must not travel
		branch  string
		clean   bool
	}{
		{"clean", func(t *testing.T, dir string) {}, nil, "main", true},
		{"modified, with a stash", func(t *testing.T, dir string) {
			write(t, dir, "a.txt", "stashed\n")
			gitT(t, dir, "stash", "-q")
			write(t, dir, "a.txt", "a3\n")
		}, nil, "main", false},
		{"staged", func(t *testing.T, dir string) {
			write(t, dir, "b.txt", "b2\n")
			gitT(t, dir, "add", "b.txt")
			write(t, dir, "staged-new.txt", "n\n")
			gitT(t, dir, "add", "staged-new.txt")
		}, nil, "main", false},
		{"untracked and ignored", func(t *testing.T, dir string) {
			write(t, dir, "new.txt", "new\n")
			write(t, dir, "debug.log", "secret\n")
		}, []string{"debug.log"}, "main", false},
		{"deleted", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "a.txt"))
			gitT(t, dir, "rm", "-q", "b.txt")
		}, nil, "main", false},
		{"new subdir", func(t *testing.T, dir string) { write(t, dir, "sub/deep/c.txt", "c\n") }, nil, "main", false},
		{"tracked file matching gitignore", func(t *testing.T, dir string) {
			write(t, dir, "keep.log", "tracked\n")
			gitT(t, dir, "add", "-f", "keep.log")
			commit(t, dir, "tracked log")
			write(t, dir, "keep.log", "tracked, changed\n")
		}, nil, "main", false},
		{"detached", func(t *testing.T, dir string) {
			gitT(t, dir, "checkout", "-q", "--detach", "HEAD~1")
			write(t, dir, "b.txt", "b-detached\n")
		}, nil, "", false},
		{"other branch", func(t *testing.T, dir string) {
			gitT(t, dir, "checkout", "-q", "-b", "feature/x")
			write(t, dir, "f.txt", "f\n")
			commit(t, dir, "feature")
			write(t, dir, "a.txt", "on feature\n")
		}, nil, "feature/x", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := newRepo(t)
			c.setup(t, src)
			m := roundTrip(t, src, filepath.Join(t.TempDir(), "new", "dst"), c.ignored...)
			if m.Branch != c.branch || (m.Snapshot == "") != c.clean {
				t.Errorf("manifest %+v: want branch %q, clean %v", m, c.branch, c.clean)
			}
		})
	}
}

func TestImportIntoEmptyDir(t *testing.T) {
	isolate(t)
	src := newRepo(t)
	write(t, src, "x.txt", "x\n")
	roundTrip(t, src, t.TempDir())
}

// clone makes dst a clone of src set back to src's first commit, with a
// post-checkout hook that must not run.
func clone(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "dst")
	gitT(t, src, "clone", "-q", src, dst)
	configure(t, dst)
	gitT(t, dst, "reset", "-q", "--hard", "HEAD~1")
	write(t, dst, ".git/hooks/post-checkout", "#!/bin/sh\ntouch hook-ran\n")
	os.Chmod(filepath.Join(dst, ".git/hooks/post-checkout"), 0o755)
	return dst
}

func TestImportIntoOlderClone(t *testing.T) {
	isolate(t)
	src := newRepo(t)
	dst := clone(t, src)
	write(t, src, "b.txt", "moved\n")
	write(t, src, "new/file.txt", "new\n")
	roundTrip(t, src, dst)
	if _, err := os.Stat(filepath.Join(dst, "hook-ran")); err == nil {
		t.Error("a checkout hook ran on the destination")
	}
}

func TestImportRefusals(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(t *testing.T, dst string)
		kind  git.ErrorKind
		hint  string
	}{
		{"local changes", func(t *testing.T, dst string) { write(t, dst, "a.txt", "local work\n") }, git.KindDirty, "stash"},
		{"untracked file", func(t *testing.T, dst string) { write(t, dst, "mine.txt", "x\n") }, git.KindDirty, "commit, stash or remove"},
		{"diverged branch", func(t *testing.T, dst string) {
			write(t, dst, "mine.txt", "x\n")
			commit(t, dst, "local only")
		}, git.KindDiverged, "rename"},
		{"not a repo", func(t *testing.T, dst string) { os.RemoveAll(filepath.Join(dst, ".git")) }, git.KindNotEmpty, "new or empty directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := newRepo(t)
			write(t, src, "b.txt", "src work\n")
			dst := clone(t, src)
			c.setup(t, dst)
			before := files(t, dst)
			var head string
			if c.kind != git.KindNotEmpty {
				head = state(t, dst)
			}
			bundle := filepath.Join(t.TempDir(), "wt.bundle")
			m, err := Export(ctx, src, bundle)
			if err != nil {
				t.Fatal(err)
			}
			err = Import(ctx, bundle, dst, m)
			if !git.IsKind(err, c.kind) || !strings.Contains(err.Error(), c.hint) {
				t.Fatalf("Import = %v, want kind %v mentioning %q", err, c.kind, c.hint)
			}
			if after := files(t, dst); !reflect.DeepEqual(after, before) {
				t.Errorf("refused import changed files: %v -> %v", before, after)
			}
			if c.kind != git.KindNotEmpty && state(t, dst) != head {
				t.Error("refused import changed the repository")
			}
		})
	}
}

func TestImportBadManifest(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	src := newRepo(t)
	bundle := filepath.Join(t.TempDir(), "wt.bundle")
	good, err := Export(ctx, src, bundle)
	if err != nil {
		t.Fatal(err)
	}
	other := good
	other.Commit = strings.Repeat("1", 40)
	origin := []Remote{{Name: "origin", URL: "https://example.com/r.git"}}
	missing := good
	missing.Stashes = []Stash{{Commit: strings.Repeat("2", 40), Message: "not in the bundle"}}
	for name, m := range map[string]Manifest{
		"short commit":       {Commit: "abc", Ref: good.Ref},
		"ref outside":        {Commit: good.Commit, Ref: "refs/heads/main"},
		"option branch":      {Commit: good.Commit, Ref: good.Ref, Branch: "-f"},
		"bad branch":         {Commit: good.Commit, Ref: good.Ref, Branch: "a..b"},
		"previous branch":    {Commit: good.Commit, Ref: good.Ref, Branch: "@{-1}"},
		"ext remote":         {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "origin", URL: "ext::sh -c touch% /tmp/cast-pwned"}}},
		"fd remote":          {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "origin", URL: "fd::3"}}},
		"option url":         {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "origin", URL: "--upload-pack=touch /tmp/cast-pwned"}}},
		"option name":        {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "-f", URL: "https://example.com/r.git"}}},
		"bad name":           {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "a..b", URL: "https://example.com/r.git"}}},
		"helper url":         {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "origin", URL: "hg://example.com/r"}}},
		"newline url":        {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "origin", URL: "https://example.com/r\n[core]"}}},
		"index alone":        {Commit: good.Commit, Ref: good.Ref, Index: good.Commit},
		"tracking outside":   {Commit: good.Commit, Ref: good.Ref, Remotes: origin, Tracking: []Tracking{{Ref: "refs/heads/main", Commit: good.Commit}}},
		"tracking no remote": {Commit: good.Commit, Ref: good.Ref, Tracking: []Tracking{{Ref: "refs/remotes/origin/main", Commit: good.Commit}}},
		"tracking option":    {Commit: good.Commit, Ref: good.Ref, Remotes: origin, Tracking: []Tracking{{Ref: "refs/remotes/origin/-x", Commit: good.Commit}}},
		"tracking dotdot":    {Commit: good.Commit, Ref: good.Ref, Remotes: origin, Tracking: []Tracking{{Ref: "refs/remotes/origin/../../heads/main", Commit: good.Commit}}},
		"upstream remote":    {Commit: good.Commit, Ref: good.Ref, Branch: "main", Upstream: &Upstream{Remote: "origin", Merge: "refs/heads/main"}},
		"upstream merge":     {Commit: good.Commit, Ref: good.Ref, Branch: "main", Remotes: origin, Upstream: &Upstream{Remote: "origin", Merge: "--help"}},
		"stash newline":      {Commit: good.Commit, Ref: good.Ref, Stashes: []Stash{{Commit: good.Commit, Message: "x\n[core]"}}},
		"stash commit":       {Commit: good.Commit, Ref: good.Ref, Stashes: []Stash{{Commit: "stash@{0}", Message: "x"}}},
	} {
		if err := Import(ctx, bundle, filepath.Join(t.TempDir(), "d"), m); !git.IsKind(err, git.KindInvalid) {
			t.Errorf("%s: Import = %v, want git.KindInvalid", name, err)
		}
	}
	dst := filepath.Join(t.TempDir(), "d")
	if err := Import(ctx, bundle, dst, other); !git.IsKind(err, git.KindBundle) {
		t.Errorf("wrong commit: Import = %v, want git.KindBundle", err)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("failed import left %s behind", dst)
	}
	if err := Import(ctx, bundle, dst, missing); !git.IsKind(err, git.KindBundle) {
		t.Errorf("stash not in the bundle: Import = %v, want git.KindBundle", err)
	}
}

func TestCheck(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	plain := t.TempDir()
	if err := Check(ctx, plain); !git.IsKind(err, git.KindNotRepo) || !strings.Contains(err.Error(), "git init") {
		t.Errorf("plain dir: Check = %v, want git.KindNotRepo", err)
	}
	empty := t.TempDir()
	gitT(t, empty, "init", "-q", "-b", "main")
	if err := Check(ctx, empty); !git.IsKind(err, git.KindNoCommits) || !strings.Contains(err.Error(), "first commit") {
		t.Errorf("no commits: Check = %v, want git.KindNoCommits", err)
	}
	if err := Check(ctx, "relative"); !git.IsKind(err, git.KindInvalid) {
		t.Errorf("relative: Check = %v, want git.KindInvalid", err)
	}
	merging := newRepo(t)
	gitT(t, merging, "checkout", "-q", "-b", "side", "HEAD~1")
	write(t, merging, "a.txt", "side\n")
	commit(t, merging, "side")
	gitT(t, merging, "checkout", "-q", "main")
	cmd := []string{"merge", "-q", "side"}
	_ = runGit(merging, cmd...) // conflicts, by design
	if err := Check(ctx, merging); !git.IsKind(err, git.KindInProgress) || !strings.Contains(err.Error(), "abort") {
		t.Errorf("merging: Check = %v, want git.KindInProgress", err)
	}
	good := newRepo(t)
	write(t, good, "sub/x.txt", "x\n")
	if err := Check(ctx, filepath.Join(good, "sub")); err != nil {
		t.Errorf("good repo, from a subdirectory: Check = %v", err)
	}
}

func TestManifestJSON(t *testing.T) {
	b, err := json.Marshal(Manifest{Commit: "c", Branch: "b", Snapshot: "s", Ref: "r"})
	if err != nil || string(b) != `{"commit":"c","branch":"b","snapshot":"s","ref":"r"}` {
		t.Fatalf("json = %s, %v", b, err)
	}
}

// A second import of the same state (a second session sharing the
// checkout, or a retry) is a no-op; a different state is still refused.
func TestImportAgainIsANoOpOnlyForTheSameState(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	src := newRepo(t)
	write(t, src, "a.txt", "changed\n")
	write(t, src, "b.txt", "staged\n")
	gitT(t, src, "add", "b.txt")
	write(t, src, "new.txt", "untracked\n")
	dst := filepath.Join(t.TempDir(), "dst")
	roundTrip(t, src, dst)
	bundle := filepath.Join(t.TempDir(), "again.bundle")
	m, err := Export(ctx, src, bundle)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(ctx, bundle, dst, m); err != nil {
		t.Fatalf("second import of the same state: %v", err)
	}
	write(t, src, "new.txt", "edited again\n")
	if m, err = Export(ctx, src, bundle); err != nil {
		t.Fatal(err)
	}
	if err := Import(ctx, bundle, dst, m); !git.IsKind(err, git.KindDirty) {
		t.Fatalf("import of a different state over local changes: err = %v, want git.KindDirty", err)
	}
}

// A session's own git worktree (`cast fork --worktree`) travels like a
// checkout: exported from the linked worktree, with its branch and
// uncommitted changes, into an empty directory on the destination.
func TestRoundTripFromLinkedWorktree(t *testing.T) {
	isolate(t)
	src := newRepo(t)
	wt := filepath.Join(t.TempDir(), "wt")
	gitT(t, src, "worktree", "add", "-q", "-b", "feature/w", wt, "HEAD")
	write(t, wt, "new.txt", "uncommitted\n")
	m := roundTrip(t, wt, t.TempDir())
	if m.Branch != "feature/w" {
		t.Fatalf("branch %q", m.Branch)
	}
}

// A checkout's remotes arrive with it (names and URLs, plain ones only: a
// transport helper URL stays behind); a destination checkout keeps its own
// URL for a remote it already has.
func TestRemotesTravel(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	src := newRepo(t)
	gitT(t, src, "remote", "add", "origin", "https://example.com/team/app.git")
	gitT(t, src, "remote", "add", "upstream", "git@example.com:upstream/app.git")
	gitT(t, src, "remote", "add", "mirror", "/srv/git/app.git")
	gitT(t, src, "remote", "add", "evil", "ext::sh -c touch% /tmp/cast-pwned")
	bundle := filepath.Join(t.TempDir(), "wt.bundle")
	m, err := Export(ctx, src, bundle)
	if err != nil {
		t.Fatal(err)
	}
	want := "mirror\t/srv/git/app.git\norigin\thttps://example.com/team/app.git\nupstream\tgit@example.com:upstream/app.git"
	remotes := func(dir string) string {
		var lines []string
		for _, n := range strings.Split(gitT(t, dir, "remote"), "\n") {
			lines = append(lines, n+"\t"+gitT(t, dir, "remote", "get-url", n))
		}
		return strings.Join(lines, "\n")
	}
	dst := filepath.Join(t.TempDir(), "d")
	if err := Import(ctx, bundle, dst, m); err != nil {
		t.Fatal(err)
	}
	if got := remotes(dst); got != want {
		t.Fatalf("remotes after import:\n%s\nwant:\n%s", got, want)
	}

	clone := t.TempDir()
	gitT(t, clone, "clone", "-q", src, ".")
	gitT(t, clone, "remote", "set-url", "origin", "https://example.com/fork/app.git")
	if err := Import(ctx, bundle, clone, m); err != nil {
		t.Fatal(err)
	}
	if got := remotes(clone); !strings.Contains(got, "origin\thttps://example.com/fork/app.git") || !strings.Contains(got, "upstream\tgit@example.com:upstream/app.git") {
		t.Fatalf("remotes of an existing clone after import:\n%s", got)
	}
}

func TestSafeURL(t *testing.T) {
	for u, want := range map[string]bool{
		"https://github.com/org/app.git": true, "http://host/x": true, "ssh://git@host:22/x.git": true,
		"git://host/x": true, "file:///srv/git/x": true, "git@github.com:org/app.git": true, "/srv/git/app.git": true,
		"ext::sh -c touch% /tmp/x": false, "fd::3": false, "--upload-pack=touch /tmp/x": false, "-u": false,
		"hg://host/x": false, "persistent-https://host/x": false, "https://host/x\n[core]": false, "": false,
		"https:///nohost": false, "relative/path": false, "host:": false,
	} {
		if got := safeURL(u); got != want {
			t.Errorf("safeURL(%q) = %v, want %v", u, got, want)
		}
	}
}

// gitStateRepo is a clone of a bare origin with two remote branches, one
// commit ahead of origin/main, two stash entries (one with an untracked
// file) and, uncommitted: a staged change, a new staged file, a file
// staged in one version and edited again, an unstaged change and an
// untracked file.
func gitStateRepo(t *testing.T) string {
	t.Helper()
	seed := newRepo(t)
	gitT(t, seed, "branch", "feature")
	origin := filepath.Join(t.TempDir(), "origin.git")
	gitT(t, seed, "clone", "-q", "--bare", seed, origin)
	src := filepath.Join(t.TempDir(), "src")
	gitT(t, seed, "clone", "-q", origin, src)
	configure(t, src)
	write(t, src, "ahead.txt", "ahead\n")
	commit(t, src, "ahead of origin")
	write(t, src, "a.txt", "stashed once\n")
	gitT(t, src, "stash", "push", "-q", "-m", "first stash")
	write(t, src, "b.txt", "stashed twice\n")
	write(t, src, "stashed-untracked.txt", "u\n")
	gitT(t, src, "stash", "push", "-q", "-u", "-m", "second stash, with untracked")
	write(t, src, "a.txt", "staged\n")
	write(t, src, "staged-new.txt", "new\n")
	write(t, src, "b.txt", "staged b\n")
	gitT(t, src, "add", "a.txt", "staged-new.txt", "b.txt")
	write(t, src, "b.txt", "staged b, then edited\n")
	write(t, src, "ahead.txt", "unstaged\n")
	write(t, src, "untracked.txt", "untracked\n")
	return src
}

// gitState is what must be the same on both machines after a move: the
// branch line with its upstream and ahead count, the status file by file,
// the remote-tracking refs, and each stash entry with its content.
func gitState(t *testing.T, dir string) string {
	t.Helper()
	parts := []string{
		gitT(t, dir, "status", "--porcelain", "--branch", "--untracked-files=all"),
		gitT(t, dir, "for-each-ref", "--format=%(refname) %(objectname)", "refs/remotes/origin/main", "refs/remotes/origin/feature"),
		stashList(t, dir),
	}
	for i := range strings.Count(parts[2], "\n") + 1 {
		parts = append(parts, gitT(t, dir, "stash", "show", "-p", "--include-untracked", "stash@{"+strconv.Itoa(i)+"}"))
	}
	return strings.Join(parts, "\n--\n")
}

// TestGitStateTravels: what was staged is staged on the destination, the
// branch still tracks origin/main (known without a fetch), and the stash
// entries arrive in order with their content, into a new directory and
// into an older clone that already has refs and a stash of its own.
func TestGitStateTravels(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	src := gitStateRepo(t)
	want := gitState(t, src)
	if !strings.Contains(want, "## main...origin/main [ahead 1]") || !strings.Contains(want, "MM b.txt") {
		t.Fatalf("source state is not what the test builds:\n%s", want)
	}
	bundle := filepath.Join(t.TempDir(), "wt.bundle")
	m, err := Export(ctx, src, bundle)
	if err != nil {
		t.Fatal(err)
	}
	if m.Index == "" || m.Upstream == nil || len(m.Tracking) != 2 || len(m.Stashes) != 2 {
		t.Fatalf("manifest %+v", m)
	}

	fresh := filepath.Join(t.TempDir(), "fresh")
	if err := Import(ctx, bundle, fresh, m); err != nil {
		t.Fatal(err)
	}
	if got := gitState(t, fresh); got != want {
		t.Errorf("new checkout:\n%s\nwant:\n%s", got, want)
	}

	// An older clone of the same origin: its origin/main moves forward,
	// its own stash entry stays below the source's.
	older := filepath.Join(t.TempDir(), "older")
	gitT(t, src, "clone", "-q", gitT(t, src, "remote", "get-url", "origin"), older)
	configure(t, older)
	write(t, older, "a.txt", "the older clone's own stash\n")
	gitT(t, older, "stash", "push", "-q", "-m", "mine")
	if err := Import(ctx, bundle, older, m); err != nil {
		t.Fatal(err)
	}
	got := gitState(t, older)
	if mine := stashList(t, older); !strings.HasPrefix(mine, stashList(t, src)+"\n") || !strings.HasSuffix(mine, "On main: mine") {
		t.Errorf("older clone's stash list:\n%s", mine)
	}
	if cut := strings.Index(got, "\n--\n"); cut < 0 || got[:cut] != want[:strings.Index(want, "\n--\n")] {
		t.Errorf("older clone:\n%s\nwant:\n%s", got, want)
	}
}

// TestCleanSource: after a move, Clean leaves the source's work tree clean
// with its changes in one stash entry that gives the whole state back
// (staged stays staged on `git stash pop --index`); a source changed since
// the export is left alone and says so.
func TestCleanSource(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	src := gitStateRepo(t)
	before := status(t, src)
	m, err := Export(ctx, src, filepath.Join(t.TempDir(), "wt.bundle"))
	if err != nil {
		t.Fatal(err)
	}
	const msg = "cast: moved to linux-1 (migration m1)"
	write(t, src, "late.txt", "written after the export\n")
	if ok, err := Clean(ctx, src, m, msg); ok || !git.IsKind(err, git.KindDirty) || !strings.Contains(err.Error(), "keeps its changes") {
		t.Fatalf("Clean after a later change = %v, %v; want git.KindDirty", ok, err)
	}
	if got := status(t, src); !strings.Contains(got, "?? late.txt") || !strings.Contains(got, "MM b.txt") {
		t.Fatalf("refused Clean changed the source:\n%s", got)
	}
	os.Remove(filepath.Join(src, "late.txt"))

	if ok, err := Clean(ctx, src, m, msg); !ok || err != nil {
		t.Fatalf("Clean = %v, %v", ok, err)
	}
	if got := status(t, src); got != "" {
		t.Fatalf("source after Clean:\n%s", got)
	}
	if top := gitT(t, src, "stash", "list", "-1", "--format=%gs"); top != "On main: "+msg {
		t.Fatalf("top stash entry %q", top)
	}
	gitT(t, src, "stash", "pop", "-q", "--index")
	if got := status(t, src); got != before {
		t.Fatalf("state popped back:\n%s\nwant:\n%s", got, before)
	}
	if ok, err := Clean(ctx, newRepo(t), Manifest{Commit: m.Commit}, msg); ok || err != nil {
		t.Fatalf("Clean of a state without changes = %v, %v; want nothing done", ok, err)
	}
}
