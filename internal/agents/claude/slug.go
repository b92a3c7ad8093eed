package claude

import (
	"path/filepath"
	"strconv"
	"unicode/utf16"
)

// maxSlug is where Claude Code starts shortening project folder names.
const maxSlug = 200

// Slug is Claude Code's project folder name for cwd, as the 2.1.197 binary
// computes it: every UTF-16 code unit that is not an ASCII letter or digit
// becomes "-" (so a character outside the BMP becomes "--"); names longer
// than 200 keep 200 and add "-" and the base-36 absolute value of a Java-style
// 32-bit string hash of cwd.
func Slug(cwd string) string {
	units := utf16.Encode([]rune(cwd))
	b := make([]byte, len(units))
	for i, u := range units {
		if u < 128 && isAlnum(byte(u)) {
			b[i] = byte(u)
		} else {
			b[i] = '-'
		}
	}
	if len(b) <= maxSlug {
		return string(b)
	}
	var h int32
	for _, u := range units {
		h = (h << 5) - h + int32(u)
	}
	abs := int64(h)
	if abs < 0 {
		abs = -abs
	}
	return string(b[:maxSlug]) + "-" + strconv.FormatInt(abs, 36)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// ProjectDir is where Claude Code looks for cwd's sessions under home
// (CLAUDE_CONFIG_DIR). The CLI sees its working directory with symlinks
// resolved (getcwd), so the folder is derived from the resolved path.
func ProjectDir(home, cwd string) string {
	if r, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = r
	}
	return filepath.Join(home, "projects", Slug(cwd))
}
