package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/testharness"
)

// controlplane outside --dev keeps its secrets key under the config dir by
// default, never in --data-dir, and refuses a --secrets-key-file there,
// saying what to do.
func TestSecretsKeyOutsideDataDir(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	dataDir, confDir := t.TempDir(), t.TempDir()
	env := []string{"XDG_CONFIG_HOME=" + confDir}
	args := []string{"--data-dir", dataDir, "--listen", freeAddr(t), "--metrics-listen", "", "--insecure"}
	refused := testharness.StartProcEnv(t, env, filepath.Join(bins, "controlplane"),
		append(args, "--secrets-key-file", filepath.Join(dataDir, "secrets.key"))...)
	if code, ok := refused.Wait(30 * time.Second); !ok || code == 0 || !strings.Contains(refused.Output(), "move it out") {
		t.Fatalf("a key inside --data-dir: exit %d (exited %v):\n%s", code, ok, refused.Output())
	}
	cp := testharness.StartProcEnv(t, env, filepath.Join(bins, "controlplane"), args...)
	testharness.WaitFor(t, 30*time.Second, "the control plane serving", func() bool {
		return strings.Contains(cp.Output(), "control plane serving")
	})
	key := filepath.Join(confDir, "cast", "secrets.key")
	mode0600(t, key)
	if !strings.Contains(cp.Output(), "created a new secrets key") || !strings.Contains(cp.Output(), key) {
		t.Errorf("the start does not say where its new key is:\n%s", cp.Output())
	}
	if matches, _ := filepath.Glob(filepath.Join(dataDir, "secrets.key*")); len(matches) != 0 {
		t.Fatalf("a secrets key in the data dir: %v", matches)
	}
}
