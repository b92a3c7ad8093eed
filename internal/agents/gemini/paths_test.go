package gemini

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// sessionFiles finds a session's files by the short id in their names,
// across every project's chats folder, and none for an id whose short id
// names no file (a shorter id's short id is all of it).
func TestSessionFiles(t *testing.T) {
	home := t.TempDir()
	id := "0123abcd-0000-4000-8000-000000000000"
	var want []string
	for _, p := range []struct {
		slug, name string
		match      bool
	}{
		{"proj", "session-2026-01-02T10-00-0123abcd.jsonl", true},
		{"proj", "session-2026-01-02T10-05-0123abcd.jsonl", true}, // a resume's stray
		{"other", "session-2026-01-03T09-00-0123abcd.jsonl", true},
		{"proj", "session-2026-01-02T10-00-99999999.jsonl", false},
		{"proj", "0123abcd.jsonl", false},
	} {
		dir := filepath.Join(home, "tmp", p.slug, "chats")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, p.name)
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if p.match {
			want = append(want, path)
		}
	}
	got, err := sessionFiles(allChats(home), id)
	slices.Sort(got)
	slices.Sort(want)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("sessionFiles = %v, %v; want %v", got, err, want)
	}
	if got, err := sessionFiles(allChats(home), "0123abc"); got != nil || err != nil {
		t.Errorf("an id shorter than 8, naming no file: %v, %v; want none", got, err)
	}
}

// Two turns in one cwd on one node (two sessions, or a turn and a rebuild)
// find the same project folder: claim rewrites the folder's .project_root
// each time, and written in place (truncated, then filled) a reader in
// between found it empty, took the folder for another project's and
// claimed a new one (proj-1), so the native session went where the CLI
// never looks.
func TestConcurrentProjectSlugsAgree(t *testing.T) {
	home, cwd := t.TempDir(), "/work/proj"
	first, err := projectSlug(home, cwd)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			for range n {
				slug, err := projectSlug(home, cwd)
				if err == nil && slug != first {
					err = fmt.Errorf("slug %q, want %q (a .project_root read mid-write)", slug, first)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
