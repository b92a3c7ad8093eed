package gemini

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Gemini CLI 0.61 merges four settings files, lowest first: system
// defaults, the user's ~/.gemini/settings.json, the workspace's, and system
// settings (mcpServers merged key by key, so every file's servers apply).
// The two system files are the only ones a variable can move, for one
// process: GEMINI_CLI_SYSTEM_SETTINGS_PATH, and
// GEMINI_CLI_SYSTEM_DEFAULTS_PATH (default: system-defaults.json beside
// the system settings file). It reads either only when root owns it and
// every folder above it and none is writable by group or others
// (isFileAndDirectorySecureSync); otherwise it skips the file with a
// "Security Warning".
const (
	SystemSettingsEnv = "GEMINI_CLI_SYSTEM_SETTINGS_PATH"
	SystemDefaultsEnv = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"
)

// SystemDefaultsPath is the system-defaults file Gemini CLI reads with the
// environment getenv looks up.
func SystemDefaultsPath(getenv func(string) string) string {
	if p := getenv(SystemDefaultsEnv); p != "" {
		return p
	}
	settings := getenv(SystemSettingsEnv)
	if settings == "" {
		settings = "/etc/gemini-cli/settings.json"
	}
	return filepath.Join(filepath.Dir(settings), "system-defaults.json")
}

// CheckSystemFile says why Gemini CLI would skip path as a system settings
// file, or nil when it reads it: path and its real target, and every folder
// above either, must be owned by root and not writable by group or others;
// a symlink on the way must be root's too.
func CheckSystemFile(path string) error {
	path = filepath.Clean(path)
	if _, err := os.Stat(path); err != nil {
		return err
	}
	if err := checkChain(path); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil || real == path {
		return err
	}
	return checkChain(real)
}

// checkChain checks the file at path and every folder above it.
func checkChain(path string) error {
	if err := checkRootOwned(path, false); err != nil {
		return err
	}
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if err := checkRootOwned(dir, true); err != nil {
			return err
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

func checkRootOwned(p string, dir bool) error {
	if li, err := os.Lstat(p); err == nil && li.Mode()&os.ModeSymlink != 0 && ownerOf(li) != 0 {
		return fmt.Errorf("symlink %s is not owned by root", p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	switch {
	case dir && !fi.IsDir():
		return fmt.Errorf("%s is not a folder", p)
	case !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a file", p)
	case ownerOf(fi) != 0:
		return fmt.Errorf("%s is not owned by root (uid %d)", p, ownerOf(fi))
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by group or others (mode %o)", p, fi.Mode().Perm())
	}
	return nil
}

// ownerOf is the file's owner uid (-1 when the platform does not say).
func ownerOf(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
