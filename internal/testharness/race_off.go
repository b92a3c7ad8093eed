//go:build !race

package testharness

// RaceOn: see race_on.go.
const RaceOn = false
