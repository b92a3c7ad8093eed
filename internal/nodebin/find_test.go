package nodebin

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
)

func TestUnderGoRun(t *testing.T) {
	for _, tc := range []struct {
		exe  string
		want bool
	}{
		{"/tmp/go-build1234567/b001/exe/controlplane", true},
		{"/home/u/.cache/gotmp/go-build99/b001/exe/controlplane", true},
		{"/home/u/cast/bin/controlplane", false},
		{"/usr/bin/controlplane", false},
		{"/tmp/go-build1234567/b001/controlplane.test", false}, // go test, not go run
	} {
		if got := underGoRun(tc.exe); got != tc.want {
			t.Errorf("underGoRun(%q) = %v, want %v", tc.exe, got, tc.want)
		}
	}
}

// Only cast's node counts as the node binary: not Node.js (here any
// other file), not another Go program of the module (this test).
func TestIsNodeOf(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "node")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho v20.0.0\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{self, script, filepath.Join(t.TempDir(), "missing")} {
		if isNodeOf(p, "github.com/cast-dev/cast") {
			t.Errorf("isNodeOf(%s) = true", p)
		}
	}
	if got, err := Find(context.Background(), "/given/node", t.TempDir(), zap.NewNop()); err != nil || got != "/given/node" {
		t.Errorf("Find with a given binary = %q, %v", got, err)
	}
}
