package web_test

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

// appDir is the web app's source, whose node_modules `npm ci` fills
// (.ci/install-web.sh; make test runs it).
func appDir(t *testing.T) string {
	t.Helper()
	app := filepath.Join(testharness.RepoRoot(t), "internal", "web", "app")
	if _, err := os.Stat(filepath.Join(app, "node_modules", ".bin", "vite")); err != nil {
		// make test installs them: missing is a failure, never a skip.
		t.Fatal("the web app's node_modules are missing: run `bash .ci/install-web.sh` (make test does)")
	}
	return app
}

// The committed build (dist/, embedded in the binary) is what the app's
// sources build to today: `npm run build` in internal/web/app after any
// change to them.
func TestCommittedAssetsMatchBuild(t *testing.T) {
	app := appDir(t)
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(app, "node_modules", ".bin", "vite"), "build", "--outDir", out, "--emptyOutDir", "--logLevel", "warn")
	cmd.Dir = app
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("vite build: %v\n%s", err, b)
	}
	sameTree(t, out, filepath.Join(app, "..", "dist"), "internal/web/dist", "run `npm run build` in internal/web/app")
}

// The committed TypeScript clients are what buf.gen.web.yaml makes from
// proto/ today.
func TestGeneratedClientsAreCurrent(t *testing.T) {
	app := appDir(t)
	root := filepath.Join(app, "..", "..", "..")
	out := t.TempDir()
	tmpl, _ := json.Marshal(map[string]any{
		"version": "v2",
		"plugins": []map[string]any{{
			"local": filepath.Join(app, "node_modules", ".bin", "protoc-gen-es"), "out": out,
			"opt": []string{"target=ts", "import_extension=none"}, "include_imports": true,
		}},
	})
	// buf is the web app's pinned release, beside protoc-gen-es.
	cmd := exec.Command(filepath.Join(app, "node_modules", ".bin", "buf"), "generate", "--template", string(tmpl))
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("buf generate: %v\n%s", err, b)
	}
	sameTree(t, out, filepath.Join(app, "src", "gen"), "internal/web/app/src/gen",
		"run `make web`, then `npm run build` in internal/web/app")
}

// sameTree fails for each file that differs between a fresh output and
// the committed one, or is only in one of them.
func sameTree(t *testing.T, fresh, committed, name, fix string) {
	t.Helper()
	n := 0
	walk := func(from, other string, cmp bool) {
		err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(from, p)
			b, err := os.ReadFile(filepath.Join(other, rel))
			switch {
			case err != nil:
				t.Errorf("%s/%s: only in one of the fresh build and the committed one; %s", name, rel, fix)
			case cmp:
				n++
				if a, _ := os.ReadFile(p); !bytes.Equal(a, b) {
					t.Errorf("%s/%s is stale; %s", name, rel, fix)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	walk(fresh, committed, true)
	walk(committed, fresh, false)
	if n == 0 {
		t.Fatalf("the fresh %s is empty", name)
	}
}
