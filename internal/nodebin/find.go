// Package nodebin is cast's node binary as other programs use it: finding
// it (controlplane --dev runs it as its dev node; the cast CLI runs it for
// what needs the node's runner), and the CLI's side of the node's hidden
// subcommands, so neither the control plane nor the CLI links the runner,
// the canary or the fake model: they run the node binary instead.
package nodebin

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"go.uber.org/zap"
)

// nodeMain is the node binary's main package, below the module's path.
const nodeMain = "/cmd/node"

// ErrNotFound is Find's error when there is no node binary of cast's to
// run; callers say what to do about it.
var ErrNotFound = errors.New("no node binary of cast's")

// Find is the node binary to run: given (a --node-bin) it is used as is;
// else the node beside this executable (go build -o bin/ ./cmd/..., make
// build, an install); else, under `go run` (this executable lives in the
// go command's temporary build folder), one built from the module it runs
// from into buildDir (go build skips it when it is up to date, so only
// the first start waits); else the node on PATH. A `node` found is used
// only if it is cast's (its build info says so): on most PATHs node is
// Node.js.
func Find(ctx context.Context, given, buildDir string, lg *zap.Logger) (string, error) {
	if given != "" {
		return given, nil
	}
	module := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		module = bi.Main.Path
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this executable: %w", err)
	}
	if p := filepath.Join(filepath.Dir(exe), "node"); isNodeOf(p, module) {
		return p, nil
	}
	if underGoRun(exe) && module != "" {
		return buildNode(ctx, module, buildDir, lg)
	}
	if p, err := exec.LookPath("node"); err == nil && isNodeOf(p, module) {
		return p, nil
	}
	return "", fmt.Errorf("%w beside %s nor on PATH", ErrNotFound, exe)
}

// isNodeOf says whether p is the node daemon of module.
func isNodeOf(p, module string) bool {
	if module == "" {
		return false
	}
	bi, err := buildinfo.ReadFile(p)
	return err == nil && bi.Main.Path == module && bi.Path == module+nodeMain
}

// underGoRun says whether exe is a binary `go run` built: it lives in the
// go command's work folder, go-build*/.../exe/.
func underGoRun(exe string) bool {
	return filepath.Base(filepath.Dir(exe)) == "exe" && strings.Contains(exe, string(filepath.Separator)+"go-build")
}

// buildNode builds module's node into dir from the working directory's
// module, the one `go run` built this executable from.
func buildNode(ctx context.Context, module, dir string, lg *zap.Logger) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "node")
	lg.Info("building the node binary (go run)", zap.String("bin", out))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, module+nodeMain)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("under go run: go build %s: %w (or build it yourself)", module+nodeMain, err)
	}
	return out, nil
}
