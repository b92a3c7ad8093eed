//go:build race

package store_test

// raceOn: the race detector slows the tests' own CPU work (text, zstd,
// the embedded etcd) about tenfold, so the size tests run smaller.
const raceOn = true
