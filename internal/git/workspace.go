// Package git is cast's git runner and its inspection of a
// session's working directory. Run and RunInput run every git command cast
// runs, reading or writing (internal/treemove's bundles, the node's `git
// worktree add` and `remove`), as an argument list (never through a
// shell), hardened the same way and with errors of one kind (ErrorKind).
// Inspect (and Open's Repo) reads a working directory without changing it:
// which files are changed now and which commits were made in a time
// window, with no pager, no prompts, no optional locks and a timeout, so
// inspecting a workspace an agent is busy in neither blocks nor disturbs
// it. It knows nothing of gRPC or etcd.
package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Defaults for Options.
const (
	DefaultTimeout    = 10 * time.Second
	DefaultMaxCommits = 200
	DefaultMaxFiles   = 2000
	maxOutput         = 32 << 20 // bytes of git output read at most
)

// ErrorKind says why git work failed: a workspace that cannot be
// inspected, or a work tree that cannot be exported or imported
// (internal/treemove). It is the one kind of every git error cast reports.
type ErrorKind int

const (
	KindInvalid    ErrorKind = iota + 1 // bad argument: empty or relative path, bad manifest, bad path map
	KindNotFound                        // the path does not exist on this machine
	KindNotDir                          // the path is not a directory
	KindNotRepo                         // not a git work tree (or, to worktree, not its top-level directory)
	KindUntrusted                       // git refuses the repository (safe.directory)
	KindNoGit                           // no git binary on PATH
	KindTimeout                         // git did not answer in time
	KindGit                             // git failed otherwise
	KindNoCommits                       // the repository has no commit yet
	KindInProgress                      // a merge, rebase, cherry-pick or revert is under way
	KindShallow                         // a shallow clone cannot be bundled whole
	KindDirty                           // the destination has changes of its own
	KindDiverged                        // the destination branch has commits the source lacks
	KindNotEmpty                        // the destination exists but is neither empty nor a repository
	KindBundle                          // the bundle is missing or does not hold what the manifest says
)

var kindNames = map[ErrorKind]string{
	KindInvalid: "invalid", KindNotFound: "not_found", KindNotDir: "not_dir",
	KindNotRepo: "not_repo", KindUntrusted: "untrusted", KindNoGit: "no_git",
	KindTimeout: "timeout", KindGit: "git",
	KindNoCommits: "no_commits", KindInProgress: "in_progress", KindShallow: "shallow", KindDirty: "dirty",
	KindDiverged: "diverged", KindNotEmpty: "not_empty", KindBundle: "bundle",
}

func (k ErrorKind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is every git error cast reports: this package's, and
// internal/treemove's (Scope "worktree"); match it with errors.As or with
// IsKind.
type Error struct {
	Kind  ErrorKind
	Scope string // what reports it, the message's first word ("": workspace)
	Path  string
	Msg   string // what went wrong, for people
	Err   error  // underlying cause, if any
}

func (e *Error) Error() string {
	scope := e.Scope
	if scope == "" {
		scope = "workspace"
	}
	if e.Path == "" {
		return scope + ": " + e.Msg
	}
	return fmt.Sprintf("%s %s: %s", scope, e.Path, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// IsKind reports whether err is an *Error of kind k.
func IsKind(err error, k ErrorKind) bool {
	var we *Error
	return errors.As(err, &we) && we.Kind == k
}

// Options bounds an inspection.
type Options struct {
	Since      time.Time     // commits committed at or after this time (zero: all)
	Until      time.Time     // commits committed at or before this time (zero: no limit)
	MaxCommits int           // default DefaultMaxCommits
	MaxFiles   int           // default DefaultMaxFiles
	Timeout    time.Duration // per git command; default DefaultTimeout
}

func (o Options) withDefaults() Options {
	if o.MaxCommits <= 0 {
		o.MaxCommits = DefaultMaxCommits
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// FileChange is one entry of `git status --porcelain=v1`.
type FileChange struct {
	Path     string // relative to the repository root, slash-separated
	OrigPath string // source of a rename or copy
	X        byte   // index (staged) status letter, ' ' when unchanged
	Y        byte   // work tree (unstaged) status letter, ' ' when unchanged
}

// Status is the two-letter XY code as `git status --short` prints it,
// e.g. "M ", " M", "??", "R ".
func (f FileChange) Status() string { return string([]byte{f.X, f.Y}) }

// Untracked reports a file git does not track.
func (f FileChange) Untracked() bool { return f.X == '?' && f.Y == '?' }

// Staged reports a change in the index.
func (f FileChange) Staged() bool { return !f.Untracked() && f.X != ' ' && f.X != '!' }

// Unstaged reports a change in the work tree not yet in the index.
func (f FileChange) Unstaged() bool { return !f.Untracked() && f.Y != ' ' && f.Y != '!' }

// Commit is one commit made in the window.
type Commit struct {
	Hash       string
	Subject    string
	AuthorTime time.Time
	CommitTime time.Time
}

// Report is what Inspect found.
type Report struct {
	Dir              string // the real (symlink-free) directory inspected
	Root             string // the repository's top-level directory
	Files            []FileChange
	FilesTruncated   bool // more than MaxFiles entries
	Commits          []Commit
	CommitsTruncated bool // more than MaxCommits commits in the window
}

// Repo is a validated git work tree.
type Repo struct {
	Dir     string // real path of the directory asked for
	Root    string // top-level directory of the work tree
	timeout time.Duration
}

// Open validates dir: absolute, existing, a directory, inside a git work
// tree. Symlinks are resolved first, so git runs on the real path.
func Open(ctx context.Context, dir string, timeout time.Duration) (*Repo, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if dir == "" {
		return nil, &Error{Kind: KindInvalid, Msg: "no working directory given"}
	}
	if !filepath.IsAbs(dir) {
		return nil, &Error{Kind: KindInvalid, Path: dir, Msg: "not an absolute path"}
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(dir))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, &Error{Kind: KindNotFound, Path: dir, Msg: "does not exist on this machine", Err: err}
		}
		return nil, &Error{Kind: KindInvalid, Path: dir, Msg: err.Error(), Err: err}
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, &Error{Kind: KindNotFound, Path: dir, Msg: "cannot be read: " + err.Error(), Err: err}
	}
	if !fi.IsDir() {
		return nil, &Error{Kind: KindNotDir, Path: dir, Msg: "is not a directory"}
	}
	r := &Repo{Dir: real, timeout: timeout}
	out, err := r.git(ctx, "rev-parse", "--is-inside-work-tree", "--show-toplevel")
	first, rest, _ := strings.Cut(string(out), "\n")
	if strings.TrimSpace(first) == "false" {
		return nil, &Error{Kind: KindNotRepo, Path: dir, Msg: "is inside a .git directory, not a work tree"}
	}
	if err != nil {
		return nil, withPath(err, dir)
	}
	r.Root = strings.TrimSpace(rest)
	if r.Root == "" {
		return nil, &Error{Kind: KindNotRepo, Path: dir, Msg: "git found no work tree"}
	}
	return r, nil
}

// Inspect opens dir and reports its changed files and the commits made in
// the window.
func Inspect(ctx context.Context, dir string, opt Options) (*Report, error) {
	opt = opt.withDefaults()
	r, err := Open(ctx, dir, opt.Timeout)
	if err != nil {
		return nil, err
	}
	rep := &Report{Dir: r.Dir, Root: r.Root}
	if rep.Files, rep.FilesTruncated, err = r.Status(ctx, opt.MaxFiles); err != nil {
		return nil, err
	}
	if rep.Commits, rep.CommitsTruncated, err = r.Commits(ctx, opt.Since, opt.Until, opt.MaxCommits); err != nil {
		return nil, err
	}
	return rep, nil
}

// Status lists changed, staged and untracked files (ignored files are
// left out), at most max of them.
func (r *Repo) Status(ctx context.Context, max int) ([]FileChange, bool, error) {
	out, err := r.git(ctx, "status", "--porcelain=v1", "-z", "--untracked-files=normal", "--ignore-submodules=none")
	if err != nil {
		return nil, false, withPath(err, r.Dir)
	}
	files, truncated, perr := ParseStatus(out, max)
	if perr != nil {
		return nil, false, &Error{Kind: KindGit, Path: r.Dir, Msg: perr.Error(), Err: perr}
	}
	return files, truncated, nil
}

// ParseStatus reads `git status --porcelain=v1 -z` output: "XY PATH\0",
// followed by "ORIG\0" for renames and copies.
func ParseStatus(out []byte, max int) ([]FileChange, bool, error) {
	fields := bytes.Split(out, []byte{0})
	// Every entry ends in NUL: the last field is empty, or the cut-off
	// end of an output too large to read whole.
	fields = fields[:len(fields)-1]
	var files []FileChange
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) == 0 {
			continue
		}
		if len(f) < 4 || f[2] != ' ' {
			return nil, false, fmt.Errorf("unexpected git status entry %q", f)
		}
		fc := FileChange{X: f[0], Y: f[1], Path: string(f[3:])}
		if fc.X == 'R' || fc.X == 'C' || fc.Y == 'R' || fc.Y == 'C' {
			if i+1 < len(fields) {
				i++
				fc.OrigPath = string(fields[i])
			}
		}
		if max > 0 && len(files) == max {
			return files, true, nil
		}
		files = append(files, fc)
	}
	return files, false, nil
}

// Commits lists commits reachable from HEAD or a local branch whose commit
// time is in [since, until], newest first, at most max of them. Branches
// count so a commit on a branch the agent made and left is not missed;
// remote-tracking refs do not, so fetched work of others is left out. A
// repository without commits has none.
func (r *Repo) Commits(ctx context.Context, since, until time.Time, max int) ([]Commit, bool, error) {
	if max <= 0 {
		max = DefaultMaxCommits
	}
	args := []string{"log", "-z", "--no-color", "--no-show-signature", "--no-decorate",
		"--format=%H%x00%at%x00%ct%x00%s", "--max-count=" + strconv.Itoa(max+1), "--branches"}
	if _, err := r.git(ctx, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err == nil {
		args = append(args, "HEAD")
	} else if IsKind(err, KindTimeout) || IsKind(err, KindNoGit) {
		return nil, false, withPath(err, r.Dir)
	}
	// Git times are whole seconds: a commit in the session's first second counts.
	if !since.IsZero() {
		since = since.Truncate(time.Second)
		args = append(args, "--since=@"+strconv.FormatInt(since.Unix(), 10))
	}
	if !until.IsZero() {
		args = append(args, "--until=@"+strconv.FormatInt(until.Unix(), 10))
	}
	args = append(args, "--")
	out, err := r.git(ctx, args...)
	if err != nil {
		return nil, false, withPath(err, r.Dir)
	}
	commits, perr := parseLog(out)
	if perr != nil {
		return nil, false, &Error{Kind: KindGit, Path: r.Dir, Msg: perr.Error(), Err: perr}
	}
	kept := commits[:0]
	for _, c := range commits {
		if !since.IsZero() && c.CommitTime.Before(since) {
			continue
		}
		if !until.IsZero() && c.CommitTime.After(until) {
			continue
		}
		kept = append(kept, c)
	}
	if len(kept) > max {
		return kept[:max], true, nil
	}
	return kept, false, nil
}

// parseLog reads records of four NUL-terminated fields: hash, author
// time, commit time, subject.
func parseLog(out []byte) ([]Commit, error) {
	fields := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(fields) == 1 && fields[0] == "" {
		return nil, nil
	}
	var commits []Commit
	for i := 0; i+3 < len(fields); i += 4 {
		at, err1 := strconv.ParseInt(strings.TrimSpace(fields[i+1]), 10, 64)
		ct, err2 := strconv.ParseInt(strings.TrimSpace(fields[i+2]), 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("unexpected git log record %q", fields[i:i+4])
		}
		commits = append(commits, Commit{
			Hash: strings.TrimSpace(fields[i]), Subject: fields[i+3],
			AuthorTime: time.Unix(at, 0).UTC(), CommitTime: time.Unix(ct, 0).UTC(),
		})
	}
	if len(fields)%4 != 0 {
		return nil, fmt.Errorf("git log output has %d fields, not records of 4", len(fields))
	}
	return commits, nil
}

// repoEnv names variables that would point git at another repository
// than the -C directory; they are dropped from git's environment.
var repoEnv = map[string]bool{
	"GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_INDEX_FILE": true, "GIT_OBJECT_DIRECTORY": true,
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true, "GIT_COMMON_DIR": true, "GIT_NAMESPACE": true,
	"GIT_PREFIX": true, "GIT_DISCOVERY_ACROSS_FILESYSTEM": true, "GIT_EXTERNAL_DIFF": true,
	"GIT_PAGER": true, "PAGER": true, "GIT_TERMINAL_PROMPT": true, "GIT_OPTIONAL_LOCKS": true,
	"GIT_ASKPASS": true, "SSH_ASKPASS": true, "LC_ALL": true,
}

func gitEnv() []string {
	env := make([]string, 0, len(os.Environ())+6)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !repoEnv[k] {
			env = append(env, kv)
		}
	}
	return append(env,
		"GIT_TERMINAL_PROMPT=0", // never ask for credentials
		"GIT_OPTIONAL_LOCKS=0",  // status must not take index.lock from a busy agent
		"GIT_PAGER=cat", "PAGER=cat",
		"GIT_ASKPASS=", "SSH_ASKPASS=",
		"LC_ALL=C", // messages we match on are in English
	)
}

// git runs `git -C dir ARGS` with the safe settings of Git.
func (r *Repo) git(ctx context.Context, args ...string) ([]byte, error) {
	return Run(ctx, r.Dir, r.timeout, nil, args...)
}

// withPath fills in the path of an error from git.
func withPath(err error, path string) error {
	var we *Error
	if errors.As(err, &we) && we.Path == "" {
		c := *we
		c.Path = path
		return &c
	}
	return err
}

// limitedBuffer keeps the first max bytes and drops the rest, so a huge
// output cannot exhaust memory (git is not stopped; it finishes or times out).
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		if len(p) > room {
			b.Buffer.Write(p[:room])
		} else {
			b.Buffer.Write(p)
		}
	}
	return len(p), nil
}
