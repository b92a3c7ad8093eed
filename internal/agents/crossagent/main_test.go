package crossagent

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// TestMain lets maxConcurrent pairs run at once even where go test's
// default -parallel (GOMAXPROCS) is lower: the pairs mostly wait on the
// CLIs and the fake, not on CPU. An explicit -parallel wins.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if f := flag.Lookup("test.parallel"); f != nil && !explicit {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n < maxConcurrent {
			_ = flag.Set("test.parallel", strconv.Itoa(maxConcurrent))
		}
	}
	os.Exit(m.Run())
}
