package testharness

import (
	"flag"
	"strconv"
)

// MinParallel raises go test's -parallel to n when it was not given and
// its default (GOMAXPROCS) is lower; an explicit -parallel wins. Call it
// from TestMain before m.Run, in a package whose parallel tests mostly
// wait on the processes they start rather than run on the CPU: on 2 cores
// the default of 2 leaves a core idle while both tests wait.
func MinParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	f := flag.Lookup("test.parallel")
	if f == nil || explicit {
		return
	}
	if cur, err := strconv.Atoi(f.Value.String()); err == nil && cur < n {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
