package kit

import (
	"os"
	"path/filepath"
	"testing"
)

// RemoveIndexEntry removes the one entry and leaves the rest of the
// user's file as the CLI wrote it: order, other fields, mode, ending.
func TestRemoveIndexEntry(t *testing.T) {
	const scratch = "/data/probe/gemini-1"
	for _, tc := range []struct {
		name, in, want string
		mode           os.FileMode
	}{
		{name: "gemini's registry, written by JSON.stringify(v, null, 2)", mode: 0o644,
			in:   "{\n  \"projects\": {\n    \"/home/me/zeta\": \"zeta\",\n    \"" + scratch + "\": \"gemini-1\",\n    \"/home/me/a&<b>\": \"a-b\"\n  }\n}",
			want: "{\n  \"projects\": {\n    \"/home/me/zeta\": \"zeta\",\n    \"/home/me/a&<b>\": \"a-b\"\n  }\n}"},
		{name: "other fields kept in place, the trailing newline too", mode: 0o600,
			in:   "{\"z\": 1, \"projects\": {\"" + scratch + "\": {\"allowedTools\": []}}, \"a\": [1, 2]}\n",
			want: "{\n  \"z\": 1,\n  \"projects\": {},\n  \"a\": [\n    1,\n    2\n  ]\n}\n"},
		{name: "no entry: untouched", mode: 0o640,
			in: "{\"projects\":{\"/home/me/x\":\"x\"}}", want: "{\"projects\":{\"/home/me/x\":\"x\"}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "projects.json")
			if err := os.WriteFile(path, []byte(tc.in), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := RemoveIndexEntry(path, "projects", scratch); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := os.Stat(path)
			if string(got) != tc.want || fi.Mode().Perm() != tc.mode {
				t.Fatalf("file now %v\n%s\nwant %v\n%s", fi.Mode().Perm(), got, tc.mode, tc.want)
			}
		})
	}
	if err := RemoveIndexEntry(filepath.Join(t.TempDir(), "none.json"), "projects", scratch); err != nil {
		t.Fatalf("a missing index: %v", err)
	}
}
