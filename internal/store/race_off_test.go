//go:build !race

package store_test

const raceOn = false
