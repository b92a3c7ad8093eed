package worktree

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// roundTrip exports src, imports into dst and checks dst matches: HEAD,
// branch, files, and the same changed paths, none of them staged.
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
	for _, line := range strings.Split(gitT(t, dst, "status", "--porcelain"), "\n") {
		if line != "" && line[0] != ' ' && line[0] != '?' {
			t.Errorf("dst has staged change %q", line)
		}
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
		kind  ErrorKind
		hint  string
	}{
		{"local changes", func(t *testing.T, dst string) { write(t, dst, "a.txt", "local work\n") }, KindDirty, "stash"},
		{"untracked file", func(t *testing.T, dst string) { write(t, dst, "mine.txt", "x\n") }, KindDirty, "commit, stash or remove"},
		{"diverged branch", func(t *testing.T, dst string) {
			write(t, dst, "mine.txt", "x\n")
			commit(t, dst, "local only")
		}, KindDiverged, "rename"},
		{"not a repo", func(t *testing.T, dst string) { os.RemoveAll(filepath.Join(dst, ".git")) }, KindNotEmpty, "new or empty directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := newRepo(t)
			write(t, src, "b.txt", "src work\n")
			dst := clone(t, src)
			c.setup(t, dst)
			before := files(t, dst)
			var head string
			if c.kind != KindNotEmpty {
				head = state(t, dst)
			}
			bundle := filepath.Join(t.TempDir(), "wt.bundle")
			m, err := Export(ctx, src, bundle)
			if err != nil {
				t.Fatal(err)
			}
			err = Import(ctx, bundle, dst, m)
			if !IsKind(err, c.kind) || !strings.Contains(err.Error(), c.hint) {
				t.Fatalf("Import = %v, want kind %v mentioning %q", err, c.kind, c.hint)
			}
			if after := files(t, dst); !reflect.DeepEqual(after, before) {
				t.Errorf("refused import changed files: %v -> %v", before, after)
			}
			if c.kind != KindNotEmpty && state(t, dst) != head {
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
	for name, m := range map[string]Manifest{
		"short commit":    {Commit: "abc", Ref: good.Ref},
		"ref outside":     {Commit: good.Commit, Ref: "refs/heads/main"},
		"option branch":   {Commit: good.Commit, Ref: good.Ref, Branch: "-f"},
		"bad branch":      {Commit: good.Commit, Ref: good.Ref, Branch: "a..b"},
		"previous branch": {Commit: good.Commit, Ref: good.Ref, Branch: "@{-1}"},
		"ext remote":      {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "origin", URL: "ext::sh -c touch% /tmp/cast-pwned"}}},
		"fd remote":       {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "origin", URL: "fd::3"}}},
		"option url":      {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "origin", URL: "--upload-pack=touch /tmp/cast-pwned"}}},
		"option name":     {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "-f", URL: "https://example.com/r.git"}}},
		"bad name":        {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "a..b", URL: "https://example.com/r.git"}}},
		"helper url":      {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "origin", URL: "hg://example.com/r"}}},
		"newline url":     {Commit: good.Commit, Ref: good.Ref, Remotes: []Remote{{Name: "origin", URL: "https://example.com/r\n[core]"}}},
	} {
		if err := Import(ctx, bundle, filepath.Join(t.TempDir(), "d"), m); !IsKind(err, KindInvalid) {
			t.Errorf("%s: Import = %v, want KindInvalid", name, err)
		}
	}
	dst := filepath.Join(t.TempDir(), "d")
	if err := Import(ctx, bundle, dst, other); !IsKind(err, KindBundle) {
		t.Errorf("wrong commit: Import = %v, want KindBundle", err)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("failed import left %s behind", dst)
	}
}

func TestCheck(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	plain := t.TempDir()
	if err := Check(ctx, plain); !IsKind(err, KindNotRepo) || !strings.Contains(err.Error(), "git init") {
		t.Errorf("plain dir: Check = %v, want KindNotRepo", err)
	}
	empty := t.TempDir()
	gitT(t, empty, "init", "-q", "-b", "main")
	if err := Check(ctx, empty); !IsKind(err, KindNoCommits) || !strings.Contains(err.Error(), "first commit") {
		t.Errorf("no commits: Check = %v, want KindNoCommits", err)
	}
	if err := Check(ctx, "relative"); !IsKind(err, KindInvalid) {
		t.Errorf("relative: Check = %v, want KindInvalid", err)
	}
	merging := newRepo(t)
	gitT(t, merging, "checkout", "-q", "-b", "side", "HEAD~1")
	write(t, merging, "a.txt", "side\n")
	commit(t, merging, "side")
	gitT(t, merging, "checkout", "-q", "main")
	cmd := []string{"merge", "-q", "side"}
	_ = runGit(merging, cmd...) // conflicts, by design
	if err := Check(ctx, merging); !IsKind(err, KindInProgress) || !strings.Contains(err.Error(), "abort") {
		t.Errorf("merging: Check = %v, want KindInProgress", err)
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
	if err := Import(ctx, bundle, dst, m); !IsKind(err, KindDirty) {
		t.Fatalf("import of a different state over local changes: err = %v, want KindDirty", err)
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
