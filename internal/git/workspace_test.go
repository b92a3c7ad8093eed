package git

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// isolate keeps the user's git config out of the test: no global or
// system config, and repositories found no higher than the temp dir.
func isolate(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required for these tests; install git")
	}
	t.Setenv("HOME", t.TempDir()) // never the real home
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(t.TempDir()))
}

// gitT runs git in dir as a test author; extra env (dates) may be added.
func gitT(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=Cast Test", "-c", "user.email=test@cast.invalid", "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	gitT(t, dir, nil, "init", "-q")
	return dir
}

func dateEnv(t time.Time) []string {
	d := fmt.Sprintf("@%d +0000", t.Unix())
	return []string{"GIT_AUTHOR_DATE=" + d, "GIT_COMMITTER_DATE=" + d}
}

func commitAll(t *testing.T, dir, msg string, when time.Time) {
	t.Helper()
	var env []string
	if !when.IsZero() {
		env = dateEnv(when)
	}
	gitT(t, dir, nil, "add", "-A")
	gitT(t, dir, env, "commit", "-q", "--allow-empty", "-m", msg)
}

func TestStatus(t *testing.T) {
	isolate(t)
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  []string // "XY path[<-orig]"
	}{
		{"clean", func(t *testing.T, dir string) {}, nil},
		{"unstaged modification", func(t *testing.T, dir string) {
			write(t, dir, "a.txt", "changed\n")
		}, []string{" M a.txt"}},
		{"staged add and delete", func(t *testing.T, dir string) {
			write(t, dir, "new.txt", "n\n")
			gitT(t, dir, nil, "add", "new.txt")
			gitT(t, dir, nil, "rm", "-q", "c.txt")
		}, []string{"D  c.txt", "A  new.txt"}},
		{"staged then modified again", func(t *testing.T, dir string) {
			write(t, dir, "a.txt", "one\n")
			gitT(t, dir, nil, "add", "a.txt")
			write(t, dir, "a.txt", "two\n")
		}, []string{"MM a.txt"}},
		{"rename keeps the source", func(t *testing.T, dir string) {
			gitT(t, dir, nil, "mv", "b.txt", "renamed.txt")
		}, []string{"R  renamed.txt<-b.txt"}},
		{"untracked, ignored left out, dirs collapsed", func(t *testing.T, dir string) {
			write(t, dir, "f.txt", "u\n")
			write(t, dir, "build/out.bin", "x")
			write(t, dir, "newdir/x.go", "x")
			write(t, dir, "newdir/y.go", "y")
		}, []string{"?? f.txt", "?? newdir/"}},
		{"odd names are not quoted", func(t *testing.T, dir string) {
			write(t, dir, "sp ace.txt", "s")
			write(t, dir, "ünï\"code.txt", "u")
			write(t, dir, "-dash.txt", "d")
		}, []string{"?? -dash.txt", "?? sp ace.txt", "?? ünï\"code.txt"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := newRepo(t)
			write(t, dir, ".gitignore", "build/\n")
			write(t, dir, "a.txt", "a\n")
			write(t, dir, "b.txt", "b\n")
			write(t, dir, "c.txt", "c\n")
			commitAll(t, dir, "base", time.Time{})
			tc.setup(t, dir)
			rep, err := Inspect(context.Background(), dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range rep.Files {
				s := f.Status() + " " + f.Path
				if f.OrigPath != "" {
					s += "<-" + f.OrigPath
				}
				got = append(got, s)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("files\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestFileChangeFlags(t *testing.T) {
	cases := []struct {
		xy                          string
		staged, unstaged, untracked bool
	}{
		{"M ", true, false, false},
		{" M", false, true, false},
		{"MM", true, true, false},
		{"??", false, false, true},
		{"A ", true, false, false},
		{" D", false, true, false},
	}
	for _, tc := range cases {
		f := FileChange{X: tc.xy[0], Y: tc.xy[1]}
		if f.Staged() != tc.staged || f.Unstaged() != tc.unstaged || f.Untracked() != tc.untracked {
			t.Errorf("%q: staged=%v unstaged=%v untracked=%v", tc.xy, f.Staged(), f.Unstaged(), f.Untracked())
		}
	}
}

func TestParseStatus(t *testing.T) {
	cases := []struct {
		name      string
		in        string
		max       int
		want      string
		truncated bool
		wantErr   bool
	}{
		{"empty", "", 0, "", false, false},
		{"entries", " M a\x00?? b c\x00", 0, " M a|?? b c", false, false},
		{"rename pair", "R  new\x00old\x00 M x\x00", 0, "R  new<-old| M x", false, false},
		{"copy in worktree", " C dst\x00src\x00", 0, " C dst<-src", false, false},
		{"bounded", " M a\x00 M b\x00 M c\x00", 2, " M a| M b", true, false},
		{"cut-off tail dropped", " M a\x00 M partial", 0, " M a", false, false},
		{"garbage", "nonsense\x00", 0, "", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files, truncated, err := ParseStatus([]byte(tc.in), tc.max)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v", err)
			}
			var got []string
			for _, f := range files {
				s := f.Status() + " " + f.Path
				if f.OrigPath != "" {
					s += "<-" + f.OrigPath
				}
				got = append(got, s)
			}
			if strings.Join(got, "|") != tc.want || truncated != tc.truncated {
				t.Fatalf("got %q truncated=%v, want %q truncated=%v", got, truncated, tc.want, tc.truncated)
			}
		})
	}
}

func TestCommitsInWindow(t *testing.T) {
	isolate(t)
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	cases := []struct {
		name      string
		setup     func(t *testing.T, dir string)
		opt       Options
		want      []string
		truncated bool
	}{
		{"empty repository", func(t *testing.T, dir string) {}, Options{Since: start}, nil, false},
		{"only commits since the start, newest first", func(t *testing.T, dir string) {
			commitAll(t, dir, "before", start.Add(-time.Minute))
			commitAll(t, dir, "first in session", start.Add(time.Minute))
			commitAll(t, dir, "second in session", start.Add(2*time.Minute))
		}, Options{Since: start}, []string{"second in session", "first in session"}, false},
		{"commit in the start's second counts", func(t *testing.T, dir string) {
			commitAll(t, dir, "same second", start)
		}, Options{Since: start.Add(400 * time.Millisecond)}, []string{"same second"}, false},
		{"until bounds the window", func(t *testing.T, dir string) {
			commitAll(t, dir, "in", start.Add(time.Minute))
			commitAll(t, dir, "after", start.Add(10*time.Minute))
		}, Options{Since: start, Until: start.Add(5 * time.Minute)}, []string{"in"}, false},
		{"bounded count", func(t *testing.T, dir string) {
			for i := range 5 {
				commitAll(t, dir, fmt.Sprint("c", i), start.Add(time.Duration(i+1)*time.Minute))
			}
		}, Options{Since: start, MaxCommits: 3}, []string{"c4", "c3", "c2"}, true},
		{"a local branch left behind counts", func(t *testing.T, dir string) {
			commitAll(t, dir, "base", start.Add(-time.Minute))
			gitT(t, dir, nil, "checkout", "-q", "-b", "feature")
			commitAll(t, dir, "on feature", start.Add(time.Minute))
			gitT(t, dir, nil, "checkout", "-q", "main")
		}, Options{Since: start}, []string{"on feature"}, false},
		{"detached HEAD counts", func(t *testing.T, dir string) {
			commitAll(t, dir, "base", start.Add(-time.Minute))
			gitT(t, dir, nil, "checkout", "-q", "--detach")
			commitAll(t, dir, "detached", start.Add(time.Minute))
		}, Options{Since: start}, []string{"detached"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := newRepo(t)
			tc.setup(t, dir)
			rep, err := Inspect(context.Background(), dir, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range rep.Commits {
				if len(c.Hash) < 40 || c.AuthorTime.IsZero() || c.CommitTime.Before(tc.opt.Since.Truncate(time.Second)) {
					t.Fatalf("bad commit %+v", c)
				}
				got = append(got, c.Subject)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || rep.CommitsTruncated != tc.truncated {
				t.Fatalf("commits %q truncated=%v, want %q truncated=%v", got, rep.CommitsTruncated, tc.want, tc.truncated)
			}
		})
	}
}

func TestCommitAuthorTime(t *testing.T) {
	isolate(t)
	dir := newRepo(t)
	authored := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	committed := time.Now().Truncate(time.Second)
	gitT(t, dir, []string{
		fmt.Sprintf("GIT_AUTHOR_DATE=@%d +0000", authored.Unix()),
		fmt.Sprintf("GIT_COMMITTER_DATE=@%d +0000", committed.Unix()),
	}, "commit", "-q", "--allow-empty", "-m", "cherry-picked: old author date")
	rep, err := Inspect(context.Background(), dir, Options{Since: committed.Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Commits) != 1 || !rep.Commits[0].AuthorTime.Equal(authored) || !rep.Commits[0].CommitTime.Equal(committed) {
		t.Fatalf("commits %+v", rep.Commits)
	}
}

func TestOpenErrors(t *testing.T) {
	isolate(t)
	repo := newRepo(t)
	plain := t.TempDir()
	file := filepath.Join(plain, "file.txt")
	write(t, plain, "file.txt", "x")
	cases := []struct {
		name string
		dir  string
		kind ErrorKind
	}{
		{"empty", "", KindInvalid},
		{"relative", "some/dir", KindInvalid},
		{"missing", filepath.Join(plain, "gone"), KindNotFound},
		{"a file", file, KindNotDir},
		{"not a repository", plain, KindNotRepo},
		{"inside .git", filepath.Join(repo, ".git"), KindNotRepo},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Inspect(context.Background(), tc.dir, Options{})
			if !IsKind(err, tc.kind) {
				t.Fatalf("Inspect(%q) = %v, %v; want kind %v", tc.dir, rep, err, tc.kind)
			}
			if err.Error() == "" || !strings.HasPrefix(err.Error(), "workspace") {
				t.Fatalf("message %q", err)
			}
		})
	}
}

func TestSymlinkAndSubdir(t *testing.T) {
	isolate(t)
	repo := newRepo(t)
	write(t, repo, "sub/keep.txt", "k")
	commitAll(t, repo, "base", time.Time{})
	write(t, repo, "top.txt", "t")
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(filepath.Join(repo, "sub"), link); err != nil {
		t.Fatal(err)
	}
	rep, err := Inspect(context.Background(), link, Options{})
	if err != nil {
		t.Fatal(err)
	}
	realRepo, _ := filepath.EvalSymlinks(repo)
	if rep.Dir != filepath.Join(realRepo, "sub") || rep.Root != realRepo {
		t.Fatalf("dir %s root %s, want %s/sub and %s", rep.Dir, rep.Root, realRepo, realRepo)
	}
	// Paths are relative to the repository root, whatever the subdirectory.
	if len(rep.Files) != 1 || rep.Files[0].Path != "top.txt" {
		t.Fatalf("files %+v", rep.Files)
	}
}

// A repository's own config must not run programs when cast reads it.
func TestRepoConfigDoesNotRunPrograms(t *testing.T) {
	isolate(t)
	repo := newRepo(t)
	marker := filepath.Join(t.TempDir(), "ran")
	hook := filepath.Join(t.TempDir(), "hook.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, repo, nil, "config", "core.fsmonitor", hook)
	gitT(t, repo, nil, "config", "core.pager", hook)
	write(t, repo, "a.txt", "a")
	if _, err := Inspect(context.Background(), repo, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("inspecting the repository ran a program from its config")
	}
}

// Stray GIT_DIR / GIT_WORK_TREE (as inside a git hook) must not redirect git.
func TestIgnoresRepoEnv(t *testing.T) {
	isolate(t)
	a, b := newRepo(t), newRepo(t)
	write(t, a, "in-a.txt", "a")
	write(t, b, "in-b.txt", "b")
	t.Setenv("GIT_DIR", filepath.Join(b, ".git"))
	t.Setenv("GIT_WORK_TREE", b)
	rep, err := Inspect(context.Background(), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Files) != 1 || rep.Files[0].Path != "in-a.txt" {
		t.Fatalf("files %+v", rep.Files)
	}
}

func TestGitMissingAndSlow(t *testing.T) {
	isolate(t)
	repo := newRepo(t)
	empty := t.TempDir()
	t.Run("no git", func(t *testing.T) {
		t.Setenv("PATH", empty)
		if _, err := Inspect(context.Background(), repo, Options{}); !IsKind(err, KindNoGit) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		slow := t.TempDir()
		if err := os.WriteFile(filepath.Join(slow, "git"), []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", slow+string(os.PathListSeparator)+os.Getenv("PATH"))
		start := time.Now()
		_, err := Inspect(context.Background(), repo, Options{Timeout: 200 * time.Millisecond})
		if !IsKind(err, KindTimeout) {
			t.Fatalf("err %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("timeout took %s", d)
		}
	})
}

// A failed git command's error names the line that says why, not the
// progress git printed before it.
func TestGitErrorSaysWhy(t *testing.T) {
	isolate(t)
	repo := newRepo(t)
	commitAll(t, repo, "first", time.Time{})
	gitT(t, repo, nil, "branch", "feat")
	gitT(t, repo, nil, "worktree", "add", "-q", filepath.Join(t.TempDir(), "a"), "feat")
	// The branch is checked out in the first worktree: git prints
	// "Preparing worktree (checking out 'feat')", then the fatal line.
	_, err := Run(context.Background(), repo, 0, nil, "worktree", "add", filepath.Join(t.TempDir(), "b"), "feat")
	if !IsKind(err, KindGit) || !strings.Contains(err.Error(), "fatal:") || strings.Contains(err.Error(), "Preparing") {
		t.Fatalf("err %v, want git's fatal line alone", err)
	}
}

func TestProblemLine(t *testing.T) {
	for _, tc := range []struct{ stderr, want string }{
		{"Preparing worktree (new branch 'x')\nfatal: a branch named 'x' already exists", "fatal: a branch named 'x' already exists"},
		{"warning: w\nerror: pathspec 'x' did not match", "error: pathspec 'x' did not match"},
		{"something odd\nmore", "something odd"},
		{"  only line  ", "only line"},
	} {
		if got := problem(tc.stderr); got != tc.want {
			t.Errorf("problem(%q) = %q, want %q", tc.stderr, got, tc.want)
		}
	}
}
