package e2e

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cast-dev/cast/internal/testharness"
)

// The checked-in generated code must be what `buf generate` makes from
// proto/ today, and the protos must pass `buf lint`. Regenerate with
// `make generate`.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	// The buf release pinned in the web app's packages (`make web-deps`).
	buf := filepath.Join(root, "internal", "web", "app", "node_modules", ".bin", "buf")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(buf, args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("buf %v: %v\n%s", args, err, out)
		}
	}
	run("lint")
	out := t.TempDir()
	tmpl, _ := json.Marshal(map[string]any{
		"version": "v2",
		// cast's protos, as buf.gen.yaml: the web app's module is only
		// its TypeScript's.
		"inputs": []map[string]any{{"directory": "proto"}},
		"plugins": []map[string]any{
			{"local": []string{"go", "tool", "protoc-gen-go"}, "out": out, "opt": "paths=source_relative"},
			{"local": []string{"go", "tool", "protoc-gen-go-grpc"}, "out": out, "opt": "paths=source_relative"},
		},
	})
	run("generate", "--template", string(tmpl))
	checked := filepath.Join(root, "internal", "gen")
	seen := 0
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(checked, rel))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("internal/gen/%s is stale or missing; run `make generate`", rel)
		}
		seen++
		return nil
	})
	if err != nil || seen == 0 {
		t.Fatalf("generated %d files: %v", seen, err)
	}
	filepath.WalkDir(checked, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(checked, p)
			if _, err := os.Stat(filepath.Join(out, rel)); err != nil {
				t.Errorf("internal/gen/%s is not generated from proto/ any more; run `make generate`", rel)
			}
		}
		return nil
	})
}
