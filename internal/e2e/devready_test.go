package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/testharness"
)

// `controlplane --dev`'s ready line named the embedded etcd's folder
// (DIR/etcd) as its data_dir, not the data dir given with --data-dir or
// defaulted (~/.local/share/cast/controlplane): someone looking for where
// dev mode keeps things, or what to remove for a fresh start, was sent one
// level too deep. It names the data dir itself now, given or defaulted.
func TestDevReadyNamesTheDataDir(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	given := filepath.Join(t.TempDir(), "data")
	home := t.TempDir()
	for _, tc := range []struct {
		name, want string
		env, args  []string
	}{
		{"given", given, nil, []string{"--data-dir", given}},
		{"defaulted", filepath.Join(home, ".local", "share", "cast", "controlplane"), []string{"HOME=" + home, "XDG_DATA_HOME="}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--dev", "--listen", freeAddr(t), "--metrics-listen", "127.0.0.1:0", "--node-name", "devnode",
				"--log-format", "json", "--node-agents-config", missingAgentsConfig(t)}, tc.args...)
			dev := testharness.StartProcEnv(t, tc.env, filepath.Join(bins, "controlplane"), args...)
			var ready map[string]any
			testharness.WaitFor(t, 60*time.Second, "the dev control plane's ready line", func() bool {
				ready = readyLine(dev.Output())
				return ready != nil
			})
			if ready["data_dir"] != tc.want {
				t.Fatalf("the ready line's data_dir is %v, want %s: %v", ready["data_dir"], tc.want, ready)
			}
			// No agent's CLI is there (missingAgentsConfig): none is one
			// to try. Muse, with no login check, was ("binary found").
			if try, ok := ready["try"]; ok {
				t.Fatalf("the ready line says to try %v, whose CLI is missing: %v", try, ready)
			}
		})
	}
}

// readyLine is dev mode's ready line among the JSON log lines in out (nil
// until it is logged): "dev mode ready", or its warning with no agent
// logged in.
func readyLine(out string) map[string]any {
	for _, l := range strings.Split(out, "\n") {
		var line map[string]any
		if json.Unmarshal([]byte(l), &line) == nil && strings.HasPrefix(fmtMsg(line["msg"]), "dev mode ready") {
			return line
		}
	}
	return nil
}

func fmtMsg(v any) string {
	s, _ := v.(string)
	return s
}
