package agents

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// InstalledVersion is the CLI's version as its npm package (or native
// installer's versioned file) records it, "" when unknown. Nothing is run:
// `--version` would start the agent in someone's HOME.
func InstalledVersion(bin string) string {
	if bin == "" {
		return ""
	}
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return ""
	}
	// Claude's native installer: ~/.local/share/claude/versions/2.1.197.
	if base := filepath.Base(real); looksLikeVersion(base) {
		return base
	}
	// An npm package: the package.json of the folder under node_modules
	// that holds the launcher.
	dir := filepath.Dir(real)
	for range 4 {
		parent := filepath.Dir(dir)
		scoped := strings.HasPrefix(filepath.Base(parent), "@") && filepath.Base(filepath.Dir(parent)) == "node_modules"
		if filepath.Base(parent) == "node_modules" || scoped {
			return packageVersion(filepath.Join(dir, "package.json"))
		}
		dir = parent
	}
	return ""
}

func packageVersion(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var p struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.Version
}

func looksLikeVersion(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}
