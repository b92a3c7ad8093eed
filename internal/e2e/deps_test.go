package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/testharness"
)

// Only the control plane links etcd: the CLI and the node speak gRPC.
func TestOnlyControlPlaneLinksEtcd(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	for _, pkg := range []string{"./cmd/cast", "./cmd/node"} {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "go.etcd.io/") || strings.HasSuffix(dep, "/internal/store") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
	cmd := exec.Command("go", "list", "-deps", "./cmd/controlplane")
	cmd.Dir = root
	out, _ := cmd.Output()
	if !strings.Contains(string(out), "go.etcd.io/etcd/server/v3/embed") {
		t.Error("controlplane should link the embedded etcd")
	}
}

// Leaves import nothing of cast's (and nothing of etcd's or gRPC's): the
// fleet's account, usage-window and limit types (internal/quota), shared by
// the runner, the node, the store, the wire and the fleet; and the one
// ticker loop (internal/tick) behind every periodic job.
func TestLeavesImportNothing(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	for _, leaf := range []string{"internal/quota", "internal/tick"} {
		cmd := exec.Command("go", "list", "-deps", "./"+leaf)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", leaf, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if first, _, _ := strings.Cut(dep, "/"); dep != "github.com/cast-dev/cast/"+leaf && strings.Contains(first, ".") {
				t.Errorf("%s depends on %s", leaf, dep)
			}
		}
	}
}
