package agenttest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// MatrixEnv set to "full" runs every agent in every real-CLI test table
// (`make test-full` sets it). The CLIs' CPU is most of the default run on
// two cores, so by default a table over agents runs a subset, by one rule:
//
//   - every agent's own code paths (reader, writer, resume, fork, adoption,
//     MCP tool, probe) keep at least one real-CLI proof in the default run;
//   - a feature that is the node's, the control plane's or the runner's
//     keeps the agents its bugs were found in, plus enough for each agent
//     to run once across the package;
//   - OpenCode, whose turn costs ~5 of Claude's, runs where it is the
//     subject.
//
// A table filters its cases with InMatrix (or FullMatrix) rather than
// skipping them, so the default run lists only what it ran, and names in
// a comment the default test that covers each agent it leaves out.
const MatrixEnv = "CAST_MATRIX"

// FullMatrix says whether every agent runs in every real-CLI test table
// (CAST_MATRIX=full).
func FullMatrix() bool { return os.Getenv(MatrixEnv) == "full" }

// InMatrix says whether a table's case name runs: always with
// CAST_MATRIX=full, else when it is one of the table's defaults.
func InMatrix(name string, defaults ...string) bool {
	return FullMatrix() || slices.Contains(defaults, name)
}

// HasTest says whether a test file matching glob (relative to the test's
// package folder) declares the top-level test name: the guard that a
// case a table leaves to another package's default test is still there.
func HasTest(t testing.TB, glob, name string) bool {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("agenttest: no test files match %s (%v)", glob, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "\nfunc "+name+"(t *testing.T) {") {
			return true
		}
	}
	return false
}
