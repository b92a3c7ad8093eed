package gemini

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/fsutil"
)

// projectRootFile marks which project owns a slug folder. Gemini CLI scans
// these markers (under tmp/ and history/) for a project missing from its
// projects.json registry, so writing them is enough for --resume to find a
// session; cast never writes the registry, which the CLI locks and owns.
const projectRootFile = ".project_root"

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// slugify is the CLI's ProjectRegistry.slugify.
func slugify(name string) string {
	s := strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if s == "" {
		return "project"
	}
	return s
}

// allChats is the pattern of every project's chats folder under home.
func allChats(home string) string { return filepath.Join(home, "tmp", "*", "chats") }

// sessionFiles are the files in chats (a folder, or a pattern of folders)
// that may hold session id: the CLI names a session's file
// session-<start>-<shortID>.jsonl, and a resume that starts in another
// minute leaves a second such file. The names are matched as text, not as
// a pattern, so an id holding a glob's metacharacters finds its own files.
func sessionFiles(chats, id string) ([]string, error) {
	if id == "" {
		return nil, nil
	}
	all, err := filepath.Glob(filepath.Join(chats, "session-*.jsonl"))
	if err != nil {
		return nil, err
	}
	suffix := "-" + shortID(id) + ".jsonl"
	var out []string
	for _, f := range all {
		if strings.HasSuffix(filepath.Base(f), suffix) {
			out = append(out, f)
		}
	}
	return out, nil
}

// shortID is the id in the name of session id's file: its first 8
// characters, as the CLI names its own (UUID) sessions, with "/", which a
// file name cannot hold, as "_"; all of a shorter id. The writer names
// cast's files by it and sessionFiles finds them by it, so a rewrite finds
// the file instead of leaving a second one.
func shortID(id string) string {
	s := strings.ReplaceAll(id, "/", "_")
	if len(s) > 8 {
		s = s[:8]
	}
	return s
}

// projectHash is the CLI's getProjectHash: sha256 of the project root.
func projectHash(cwd string) string {
	h := sha256.Sum256([]byte(cwd))
	return hex.EncodeToString(h[:])
}

// projectSlug finds the slug folder Gemini CLI uses for cwd, claiming a new
// one (with ownership markers) the way the CLI would when there is none.
func projectSlug(home, cwd string) (string, error) {
	bases := []string{filepath.Join(home, "tmp"), filepath.Join(home, "history")}
	owner := func(slug string) (string, bool) {
		for _, b := range bases {
			if data, err := os.ReadFile(filepath.Join(b, slug, projectRootFile)); err == nil {
				return strings.TrimSpace(string(data)), true
			}
		}
		return "", false
	}
	var reg struct {
		Projects map[string]string `json:"projects"`
	}
	if data, err := os.ReadFile(filepath.Join(home, "projects.json")); err == nil {
		_ = json.Unmarshal(data, &reg) // a corrupt registry is reset by the CLI too
	}
	if slug, ok := reg.Projects[cwd]; ok {
		if o, found := owner(slug); !found || o == cwd {
			return slug, claim(bases, slug, cwd)
		}
	}
	taken := map[string]bool{}
	for _, s := range reg.Projects {
		taken[s] = true
	}
	// A folder already marked for cwd wins, as in the CLI's scan.
	if entries, err := os.ReadDir(bases[0]); err == nil {
		for _, e := range entries {
			if o, ok := owner(e.Name()); ok && o == cwd && e.IsDir() {
				return e.Name(), claim(bases, e.Name(), cwd)
			}
		}
	}
	base := slugify(filepath.Base(cwd))
	for i := 0; i < 10000; i++ {
		slug := base
		if i > 0 {
			slug = fmt.Sprintf("%s-%d", base, i)
		}
		if taken[slug] {
			continue
		}
		if o, ok := owner(slug); ok && o != cwd {
			continue
		}
		return slug, claim(bases, slug, cwd)
	}
	return "", fmt.Errorf("gemini: no free project slug for %s", cwd)
}

// claim writes the ownership markers for slug.
func claim(bases []string, slug, cwd string) error {
	for _, b := range bases {
		dir := filepath.Join(b, slug)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		// Atomically: claim rewrites the marker of a folder already in use,
		// and another turn's projectSlug (or the CLI) reading it half
		// written would take the folder for another project's.
		if err := fsutil.WriteFileAtomic(filepath.Join(dir, projectRootFile), []byte(cwd), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// CwdFolders: Gemini keeps a folder per project under tmp/ (chats, logs)
// and history/, each marked with the project's root; its registry
// (projects.json) entry is ForgetCwd's.
func (Driver) CwdFolders(home, cwd string) []string {
	var out []string
	for _, b := range []string{filepath.Join(home, "tmp"), filepath.Join(home, "history")} {
		entries, _ := os.ReadDir(b)
		for _, e := range entries {
			root, err := os.ReadFile(filepath.Join(b, e.Name(), projectRootFile))
			if err == nil && e.IsDir() && strings.TrimSpace(string(root)) == cwd {
				out = append(out, filepath.Join(b, e.Name()))
			}
		}
	}
	return out
}

// ForgetCwd removes cwd's entry from Gemini's projects.json registry
// (agents.CwdIndex), which a run in a scratch folder adds, holding the
// registry's lock as the CLI takes it (proper-lockfile: the folder
// projects.json.lock), so a gemini registering a project meanwhile is not
// overwritten. A lock held past registryLockWait leaves the entry, and
// says so.
func (Driver) ForgetCwd(home, cwd string) error {
	reg := filepath.Join(home, "projects.json")
	if _, err := os.Stat(reg); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	lock := reg + ".lock"
	for deadline := time.Now().Add(registryLockWait); ; {
		err := os.Mkdir(lock, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gemini: %s stayed locked for %s (a gemini CLI holds it); its entry for %s is left", reg, registryLockWait, cwd)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer os.Remove(lock)
	return kit.RemoveIndexEntry(reg, "projects", cwd)
}

// registryLockWait is how long ForgetCwd waits for a gemini CLI to let go
// of its registry: it holds the lock only while it writes.
const registryLockWait = 5 * time.Second
