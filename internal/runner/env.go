package runner

import (
	"debug/buildinfo"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/cast-dev/cast/internal/agents"
)

// AgentDir is the agent's own folder for t: where its native sessions and
// credential store are.
func (t Turn) AgentDir() string {
	a, ok := agents.Lookup(t.Agent)
	if !ok {
		return ""
	}
	return a.Dir(buildEnv(a, t))
}

// Environ is the environment t's CLI runs with.
func (t Turn) Environ() []string {
	a, ok := agents.Lookup(t.Agent)
	if !ok {
		return nil
	}
	return buildEnv(a, t)
}

// passThrough are the only variables an isolated turn takes from the
// node's own environment: the npm launchers need node on PATH, and locale
// and time zone are harmless. Keys, base URLs and agent settings come from
// Turn.Env only, so the node operator's own credentials never leak in.
var passThrough = []string{"PATH", "LANG", "LC_ALL", "TZ", "USER", "LOGNAME", "SHELL"}

// quiet keeps every CLI headless: no colour, telemetry or self-update.
var quiet = []string{"TERM=dumb", "NO_COLOR=1", "DO_NOT_TRACK=1", "DISABLE_TELEMETRY=1",
	"DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1"}

// buildEnv is the turn's environment, t.Env last (last wins). An isolated
// turn gets HOME, XDG dirs, TMPDIR and the agent's home variable all under
// t.Home; the user's own agent (t.UserEnv) gets the user's environment as
// it is, HOME included, and nothing moved: setting CLAUDE_CONFIG_DIR even
// to its default would make Claude look for ~/.claude.json inside it.
func buildEnv(a agents.Agent, t Turn) []string {
	var env []string
	if t.UserEnv != nil {
		for _, kv := range t.UserEnv {
			if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "CAST_") {
				env = append(env, kv)
			}
		}
		env = append(append(env, "HOME="+t.Home), quiet...)
	} else {
		env = isolatedEnv(a, t.Home)
	}
	env = append(env, a.Commands.Env...)
	env = append(env, t.Env...)
	if t.Cwd != "" {
		// exec keeps a given Env as it is, so without this the CLI got
		// the node's own PWD, and OpenCode files a session under $PWD.
		env = append(agents.WithoutEnv(env, "PWD"), "PWD="+t.Cwd)
	}
	for i, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			env[i] = "PATH=" + withoutSelf(p)
		}
	}
	return env
}

// Env is the environment Run gives t's CLI. Other runs of the same CLI
// for the turn (`opencode import` rebuilding its session) need the very
// same HOME and config dirs, or they miss the agent's settings.
func Env(t Turn) []string {
	a, _ := agents.Lookup(t.Agent)
	return buildEnv(a, t)
}

// withoutSelf is path without the folders whose `node` is one of cast's
// own programs: this very executable, or any binary built from its
// module. The node daemon's binary is named node, and with its folder
// first on PATH (go build -o bin/ ./cmd/...) every npm-launched agent
// (#!/usr/bin/env node) would run it instead of Node.js, from the node
// daemon itself, `controlplane --dev`'s included.
func withoutSelf(path string) string {
	self, err := os.Executable()
	if err != nil {
		return path
	}
	me, err := os.Stat(self)
	if err != nil {
		return path
	}
	module := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		module = bi.Main.Path
	}
	dirs := filepath.SplitList(path)
	keep := dirs[:0]
	for _, dir := range dirs {
		if !isCastBinary(filepath.Join(dir, "node"), me, module) {
			keep = append(keep, dir)
		}
	}
	return strings.Join(keep, string(os.PathListSeparator))
}

// isCastBinary says whether p is the program me, or a Go binary of module.
// Its build info is read once per version of the file (builtFrom): every
// turn's environment and readiness check asks again of each `node` on
// PATH, and reading Node.js's, ~100 MB, allocated tens of MB each time.
func isCastBinary(p string, me os.FileInfo, module string) bool {
	fi, err := os.Stat(p)
	if err != nil || fi.IsDir() {
		return false
	}
	if os.SameFile(fi, me) {
		return true
	}
	if module == "" {
		return false
	}
	return builtFrom(p, fi) == module
}

// fileVersion names one version of a file: a rewrite changes its size or
// modification time.
type fileVersion struct {
	path  string
	size  int64
	mtime int64
}

// mainModules holds builtFrom's answers (fileVersion: main module path,
// "" for a file that is no Go binary); PATH has few folders, so it stays
// small.
var mainModules sync.Map

// builtFrom is the main module p (whose stat is fi) was built from, "" when
// it is no Go binary.
func builtFrom(p string, fi os.FileInfo) string {
	key := fileVersion{p, fi.Size(), fi.ModTime().UnixNano()}
	if m, ok := mainModules.Load(key); ok {
		return m.(string)
	}
	m := ""
	if bi, err := buildinfo.ReadFile(p); err == nil {
		m = bi.Main.Path
	}
	mainModules.Store(key, m)
	return m
}

// isolatedEnv is an isolated turn's environment before the agent's own
// settings: every folder a CLI writes under h.
func isolatedEnv(a agents.Agent, h string) []string {
	var env []string
	for _, k := range passThrough {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env,
		"HOME="+h,
		"TMPDIR="+filepath.Join(h, ".tmp"),
		"XDG_CONFIG_HOME="+filepath.Join(h, ".config"),
		"XDG_DATA_HOME="+filepath.Join(h, ".local", "share"),
		"XDG_STATE_HOME="+filepath.Join(h, ".local", "state"),
		"XDG_CACHE_HOME="+filepath.Join(h, ".cache"),
	)
	env = append(env, quiet...)
	if a.HomeEnv != "" && a.HomeEnv != "XDG_DATA_HOME" {
		env = append(env, a.HomeEnv+"="+a.NativeHome(h))
	}
	return env
}

// ensureDirs creates the folders the environment points at, a's own
// folder (its HomeEnv) included.
func ensureDirs(a agents.Agent, env []string) error {
	for _, k := range []string{"HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", a.HomeEnv} {
		if k == "" {
			continue
		}
		if v := EnvValue(env, k); v != "" {
			if err := os.MkdirAll(v, 0o700); err != nil {
				return err
			}
		}
	}
	return nil
}

// EnvValue returns the last value of key in env ("" when absent): the
// value a process started with env sees.
func EnvValue(env []string, key string) string { return agents.EnvValue(env, key) }
