// Command buildbins builds cast, controlplane and node into a folder as the
// tests' harness builds them (testharness.Build), for the Makefile's test
// target to build them once and hand the folder to every test package
// through CAST_TEST_BINARIES.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cast-dev/cast/internal/testharness"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: buildbins DIR (run from the module's root)")
		os.Exit(2)
	}
	root, err := os.Getwd()
	if err == nil {
		_, err = os.Stat(filepath.Join(root, "go.mod"))
	}
	if err == nil {
		err = testharness.Build(root, os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildbins:", err)
		os.Exit(1)
	}
}
