package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

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

// The web app's google.rpc.ErrorInfo (app/proto, declared so its
// TypeScript is generated offline) reads what the control plane writes:
// genproto's errdetails.ErrorInfo, field for field (and its metadata map's
// entry).
func TestErrorInfoDeclarationMatchesGenproto(t *testing.T) {
	app := appDir(t)
	image := filepath.Join(t.TempDir(), "image.binpb")
	cmd := exec.Command(filepath.Join(app, "node_modules", ".bin", "buf"), "build", filepath.Join("internal", "web", "app", "proto"), "-o", image)
	cmd.Dir = filepath.Join(app, "..", "..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("buf build: %v\n%s", err, b)
	}
	b, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	var declared *descriptorpb.DescriptorProto
	for _, f := range set.File {
		for _, m := range f.MessageType {
			if f.GetPackage() == "google.rpc" && m.GetName() == "ErrorInfo" {
				declared = m
			}
		}
	}
	if declared == nil {
		t.Fatal("app/proto declares no google.rpc.ErrorInfo")
	}
	want := protodesc.ToDescriptorProto((&errdetails.ErrorInfo{}).ProtoReflect().Descriptor())
	if got, want := fieldsOf(declared), fieldsOf(want); !slices.Equal(got, want) {
		t.Fatalf("app/proto's ErrorInfo has fields %v; genproto's has %v", got, want)
	}
}

// fieldsOf is each field of m and of its nested messages: what decides
// how its bytes read.
func fieldsOf(m *descriptorpb.DescriptorProto) []string {
	var out []string
	for _, f := range m.Field {
		out = append(out, fmt.Sprintf("%s.%s=%d %v %v %s", m.GetName(), f.GetName(), f.GetNumber(), f.GetLabel(), f.GetType(), f.GetTypeName()))
	}
	for _, n := range m.NestedType {
		out = append(out, fieldsOf(n)...)
	}
	return out
}
