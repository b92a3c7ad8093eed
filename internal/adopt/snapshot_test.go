package adopt_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The follower's copies of native files (a streamed file's snapshot, the
// bytes a whole-file reader parses) are made in its own state folder,
// never the system temp folder (often tmpfs: memory); the one a crash
// left there is removed when a follower starts, and none stays after a
// scan.
func TestFollowCopiesInItsOwnFolder(t *testing.T) {
	tests := []struct {
		name string
		rig  func(*testing.T) *rig
		// open is whether the copy is still open while the batches are
		// sent (a streamed snapshot) or already gone (parsed whole).
		open bool
	}{
		{"streamed (gemini)", func(t *testing.T) *rig {
			r := newGeminiRig(t)
			r.write(geminiHead("a"), geminiLine(0, "hello"), geminiLine(1, "hi there"))
			return r
		}, true},
		{"read whole (claude)", func(t *testing.T) *rig {
			r := newRig(t)
			r.write(line("user", "u1", "", "hello"), line("assistant", "a2", "u1", "hi there"))
			return r
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.rig(t)
			// No system temp folder at all: a copy made there fails the scan.
			t.Setenv("TMPDIR", filepath.Join(r.home, "no such folder"))
			copies := filepath.Join(r.state, "snapshots")
			if err := os.MkdirAll(copies, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(copies, "copy-stale"), []byte("a crashed node's"), 0o600); err != nil {
				t.Fatal(err)
			}
			var during []string
			r.sink.during = func() { during = names(t, copies) }
			want(t, "import", r.scan(), "hello", "hi there")
			if n := len(during); tt.open && (n != 1 || !strings.HasPrefix(during[0], "copy-")) || !tt.open && n != 0 {
				t.Fatalf("while sending, the snapshot folder held %q", during)
			}
			if left := names(t, copies); len(left) != 0 {
				t.Fatalf("after the scan the snapshot folder holds %q", left)
			}
		})
	}
}

// names lists dir's entries; none when it is not there.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
