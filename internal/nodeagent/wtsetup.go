package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// WorktreeSetup maps a checkout (its top-level directory) to the commands
// run in every new worktree made from it, e.g. {"/src/app": [["npm",
// "ci"]]}. Each command is an argv run without a shell.
type WorktreeSetup map[string][][]string

// setupTimeout bounds one setup command.
const setupTimeout = 10 * time.Minute

// LoadWorktreeSetup reads --worktree-setup. Commands run on this machine,
// so the file must belong to the node's user and be writable by nobody
// else; a repository can never bring its own (design §8).
func LoadWorktreeSetup(path string) (WorktreeSetup, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return nil, fmt.Errorf("%s belongs to uid %d, not this node's user; worktree setup commands come only from your own file", path, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%s is writable by others (mode %o): chmod go-w it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ws WorktreeSetup
	if err := json.Unmarshal(b, &ws); err != nil {
		return nil, fmt.Errorf("%s: want {\"/abs/checkout\": [[\"cmd\", \"arg\"], ...]}: %w", path, err)
	}
	for repo, cmds := range ws {
		if !filepath.IsAbs(repo) {
			return nil, fmt.Errorf("%s: checkout %q must be an absolute path", path, repo)
		}
		for _, c := range cmds {
			if len(c) == 0 || c[0] == "" {
				return nil, fmt.Errorf("%s: %s has an empty command", path, repo)
			}
		}
	}
	return ws, nil
}

// commands returns the setup for the checkout at top (real paths compared).
func (ws WorktreeSetup) commands(top string) [][]string {
	rt, err := filepath.EvalSymlinks(top)
	if err != nil {
		return nil
	}
	for repo, cmds := range ws {
		if r, err := filepath.EvalSymlinks(repo); err == nil && r == rt {
			return cmds
		}
	}
	return nil
}

// run runs the checkout's setup commands in a new worktree, in order;
// the first failure stops them (the worktree stays, as cast never removes
// one) and fails the turn with the command and its last output.
func (ws WorktreeSetup) run(ctx context.Context, top, dir string) error {
	for _, argv := range ws.commands(top) {
		cctx, cancel := context.WithTimeout(ctx, setupTimeout)
		cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		if err != nil {
			return fmt.Errorf("worktree setup `%s` failed in %s: %v: %s", strings.Join(argv, " "), dir, err, lastLine(out.String()))
		}
	}
	return nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}
