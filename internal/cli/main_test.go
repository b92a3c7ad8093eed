package cli

import (
	"os"
	"testing"

	"github.com/cast-dev/cast/internal/testharness"
)

// TestMain gives in-process commands the harness's admin token, as
// testharness.Run does for the cast binary, and a scratch config dir, so no
// test reads the real ~/.config/cast.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cast-cli-config-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	os.Setenv("CAST_TOKEN", testharness.AdminToken())
	os.Unsetenv("CAST_CONTEXT")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
