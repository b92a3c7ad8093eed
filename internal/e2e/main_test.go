package e2e

import (
	"os"
	"testing"

	"github.com/cast-dev/cast/internal/testharness"
)

// parallel is how many tests run at once where go test's default
// -parallel (GOMAXPROCS) is lower. The tests mostly wait on what they
// start (control planes, nodes, agent CLIs, the fake model's replies): at
// the default of 2 on a 2-core machine the package took 18 minutes of a
// run whose user+sys averaged 1.4 cores. Two tests overlapping can share
// nothing that three cannot (each has its own ports, HOME, data dirs and
// fake model), so this adds load, not new ways to collide; the tests that
// need a quiet machine (short leases, certificates of seconds, t.Setenv,
// five CLIs at once) are not parallel. Not more: at four, under a machine
// loaded by other jobs as well, a node took over 5 s to answer placement.
const parallel = 3

func TestMain(m *testing.M) {
	testharness.MinParallel(parallel)
	os.Exit(m.Run())
}
