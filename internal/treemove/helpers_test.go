package treemove

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// isolate keeps the user's git config out: a temp HOME, no system config,
// and repositories found no higher than the temp dir.
func isolate(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required for these tests; install git")
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_OPTIONAL_LOCKS", "0") // status in state() must not rewrite the index
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(t.TempDir()))
}

// gitT runs git in dir and returns its trimmed output.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimRight(string(out), "\n") // leading spaces matter in status
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

// configure gives a repository an identity of its own.
func configure(t *testing.T, dir string) {
	t.Helper()
	gitT(t, dir, "config", "user.name", "Cast Test")
	gitT(t, dir, "config", "user.email", "test@cast.invalid")
	gitT(t, dir, "config", "commit.gpgsign", "false")
}

// newRepo makes a repository on main with two commits.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	gitT(t, dir, "init", "-q", "-b", "main")
	configure(t, dir)
	write(t, dir, "a.txt", "a1\n")
	write(t, dir, "b.txt", "b1\n")
	write(t, dir, ".gitignore", "*.log\n")
	commit(t, dir, "first")
	write(t, dir, "a.txt", "a2\n")
	commit(t, dir, "second")
	return dir
}

func commit(t *testing.T, dir, msg string) {
	t.Helper()
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", msg)
}

// files maps every file under dir outside .git to its content, leaving
// out the names in skip.
func files(t *testing.T, dir string, skip ...string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if rel == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == ".git" {
			return nil // a linked worktree's pointer to its git dir
		}
		for _, s := range skip {
			if rel == s {
				return nil
			}
		}
		b, err := os.ReadFile(p)
		got[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// changed lists the paths git status reports, every untracked file
// listed on its own.
func changed(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	for _, line := range strings.Split(gitT(t, dir, "status", "--porcelain", "--untracked-files=all"), "\n") {
		if line != "" {
			paths = append(paths, line[3:])
		}
	}
	sort.Strings(paths)
	return paths
}

// state is what Export must not change in the source.
func state(t *testing.T, dir string) string {
	t.Helper()
	// --git-path: a linked worktree's .git is a file naming its git dir.
	indexPath := gitT(t, dir, "rev-parse", "--path-format=absolute", "--git-path", "index")
	index, err := os.ReadFile(indexPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join([]string{
		gitT(t, dir, "rev-parse", "HEAD"),
		gitT(t, dir, "rev-parse", "--symbolic-full-name", "HEAD"),
		gitT(t, dir, "status", "--porcelain", "--untracked-files=all"),
		gitT(t, dir, "stash", "list"),
		gitT(t, dir, "for-each-ref"),
		string(index),
	}, "\n--\n")
}

// runGit runs git where failure is expected.
func runGit(dir string, args ...string) error {
	return exec.Command("git", append([]string{"-C", dir}, args...)...).Run()
}

// status is `git status --porcelain` with every untracked file listed:
// the XY columns say what is staged and what is not.
func status(t *testing.T, dir string) string {
	t.Helper()
	return gitT(t, dir, "status", "--porcelain", "--untracked-files=all")
}

// stashList is each stash entry's commit and message, newest first.
func stashList(t *testing.T, dir string) string {
	t.Helper()
	if runGit(dir, "rev-parse", "--verify", "-q", "refs/stash") != nil {
		return ""
	}
	return gitT(t, dir, "log", "-g", "--format=%H %gs", "refs/stash", "--")
}
