//go:build race

package testharness

// RaceOn: the race detector slows the tests' own CPU work (text, zstd,
// the embedded etcd in the test process) about tenfold, so the size
// tests run smaller under it.
const RaceOn = true
