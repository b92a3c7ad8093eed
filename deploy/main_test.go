package deploy_test

import (
	"testing"

	"github.com/cast-dev/cast/internal/testharness"
)

// TestMain removes the binaries the tests built (testharness.Main).
func TestMain(m *testing.M) { testharness.Main(m) }
