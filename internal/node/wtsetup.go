package node

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

	"go.uber.org/zap"
)

// WorktreeSetup maps a checkout (its top-level directory) to the commands
// run in every new worktree made from it, e.g. {"/src/app": [["npm",
// "ci"]]}. Each command is an argv run without a shell.
type WorktreeSetup map[string][][]string

// setupTimeout bounds a worktree's setup, all its commands together.
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

// run runs the checkout's setup commands in a new worktree, in order,
// all within ctx; the first failure stops them (the worktree stays) and
// is returned with the command and its last output. It returns what ran.
func (ws WorktreeSetup) run(ctx context.Context, top, dir string) ([]string, error) {
	var ran []string
	for _, argv := range ws.commands(top) {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = dir
		cmd.WaitDelay = time.Second
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		line := strings.Join(argv, " ")
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("stopped after %s", setupTimeout)
			}
			return ran, fmt.Errorf("`%s` failed: %v: %s", line, err, lastLine(out.String()))
		}
		ran = append(ran, "`"+line+"`")
	}
	return ran, nil
}

// startSetup runs the setup of dir's checkout in the background, within
// setupTimeout in all, and tells the thread how it went with a notice.
// Turns do not wait for it.
func (a *Daemon) startSetup(sessionID, dir string) {
	top, err := mainCheckout(a.runCtx, dir)
	if err != nil || len(a.cfg.WorktreeSetup.commands(top)) == 0 {
		return
	}
	a.setups.Add(1)
	go func() {
		defer a.setups.Done()
		ctx, cancel := context.WithTimeout(a.runCtx, setupTimeout)
		defer cancel()
		start := time.Now()
		ran, err := a.cfg.WorktreeSetup.run(ctx, top, dir)
		text := fmt.Sprintf("Worktree setup in %s finished in %s: %s.", dir, time.Since(start).Round(time.Second), strings.Join(ran, ", "))
		if err != nil {
			text = fmt.Sprintf("Worktree setup in %s failed: %v", dir, err)
		}
		a.lg.Info("worktree setup done", zap.String("session", sessionID), zap.String("dir", dir), zap.Error(err))
		a.noteWorkspace(a.runCtx, sessionID, "setup."+dir, text)
	}()
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
