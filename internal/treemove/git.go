package treemove

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/git"
)

// Timeouts per git command: quick questions, and the commands that read
// or write the whole tree or history (add, bundle, fetch, checkout).
const (
	quickTimeout = 30 * time.Second
	heavyTimeout = 15 * time.Minute
)

// refPrefix is where this package keeps its short-lived refs; nothing
// else in cast or git uses it, so deleting them cannot lose work.
const refPrefix = "refs/cast/"

// castIdentity makes commit-tree, stash and reflog writes work on
// machines without user config; what cast writes is signed as cast.
var castIdentity = []string{
	"GIT_AUTHOR_NAME=cast", "GIT_AUTHOR_EMAIL=cast@localhost",
	"GIT_COMMITTER_NAME=cast", "GIT_COMMITTER_EMAIL=cast@localhost",
}

// snapshotIdentity adds fixed dates, so the snapshot of a given state is
// the same commit on every export.
var snapshotIdentity = append(castIdentity[:len(castIdentity):len(castIdentity)],
	"GIT_AUTHOR_DATE=@946684800 +0000", "GIT_COMMITTER_DATE=@946684800 +0000")

var objectID = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// repo runs git in one directory.
type repo struct{ dir string }

// git runs a command that reads. Hooks are disabled on every command, not
// only on checkout: update-ref alone may run reference-transaction hooks,
// and a repository moved between machines is not trusted to run code.
func (r repo) git(ctx context.Context, args ...string) (string, error) {
	return r.run(ctx, quickTimeout, nil, args...)
}

// run is git with a timeout and extra environment (temporary index,
// snapshot identity); its output is trimmed of surrounding space.
func (r repo) run(ctx context.Context, timeout time.Duration, env []string, args ...string) (string, error) {
	full := append([]string{"-c", "core.hooksPath=/dev/null"}, args...)
	out, err := git.Run(ctx, r.dir, timeout, env, full...)
	if err != nil {
		return "", wrap(err, r.dir)
	}
	return strings.TrimSpace(string(out)), nil
}

// input runs git with stdin (ref transactions: `update-ref --stdin`).
func (r repo) input(ctx context.Context, stdin string, env []string, args ...string) (string, error) {
	full := append([]string{"-c", "core.hooksPath=/dev/null"}, args...)
	out, err := git.RunInput(ctx, r.dir, heavyTimeout, env, []byte(stdin), full...)
	if err != nil {
		return "", wrap(err, r.dir)
	}
	return strings.TrimSpace(string(out)), nil
}

// exists reports whether rev names an object, telling "no" apart from
// git failing (timeout, no git), which is returned.
func (r repo) exists(ctx context.Context, rev string) (bool, error) {
	_, err := r.git(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", rev)
	if err == nil {
		return true, nil
	}
	if git.IsKind(err, git.KindGit) {
		return false, nil
	}
	return false, err
}

// tempRef names a fresh ref under refs/cast/; the nonce keeps two exports
// or imports of one repository from using each other's refs.
func tempRef(purpose string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return refPrefix + purpose + "-" + hex.EncodeToString(b[:])
}

// dropRefs deletes the temporary ref named prefix and every ref whose
// name continues it (prefix-s0, prefix/...) in one transaction, even when
// ctx is already cancelled, so an aborted export or import leaves no ref
// behind.
func (r repo) dropRefs(ctx context.Context, prefix string) {
	ctx = context.WithoutCancel(ctx)
	// A pattern matches itself and the refs below it; * stops at a slash.
	names, err := r.git(ctx, "for-each-ref", "--format=%(refname)", prefix, prefix+"-*")
	if err != nil || names == "" {
		return
	}
	var tx strings.Builder
	for _, n := range strings.Split(names, "\n") {
		tx.WriteString("delete " + n + "\n")
	}
	_, _ = r.input(ctx, tx.String(), nil, "update-ref", "--stdin")
}
