package crossagent

import (
	"os"
	"testing"
)

// pairSet selects which source->target pairs of the runnable agents a
// matrix resumes: shift < 0 is every pair; shift k is the same-agent pairs
// and each source i with target i+k (mod the agent count), so every agent
// is still a source and a target twice.
//
// TestMatrix carries every pair; TestMatrixHard, whose conversation is
// written by hand like the features', the ring hardShift. Each feature
// matrix (compaction, images, a long turn, a subagent run) takes a
// different shift, 1 to 4, so between them every cross pair resumes some feature
// in every run and every feature reaches every agent from every agent's
// writer, at 10 resumes a matrix instead of 25: the CLIs' CPU is most of
// the default test run on two cores. CAST_MATRIX=full runs every pair of
// every matrix.
type pairSet struct{ shift int }

var everyPair = pairSet{shift: -1}

// The feature matrices' shifts: all different, so that between them they
// cover every pair (TestFeatureMatricesCoverEveryPair).
const (
	compactShift  = 1
	imageShift    = 2
	longShift     = 3
	subagentShift = 4
)

// hardShift is TestMatrixHard's ring: every agent's writer and reader
// (the same-agent pairs) and every target CLI still get the hard
// conversation, from one other agent each; its content (markup-like
// text, parallel calls, a 50 KB output) reaches the other cross pairs
// only with CAST_MATRIX=full, a trade for the default run's time.
const hardShift = 1

var featureShifts = []int{compactShift, imageShift, longShift, subagentShift}

// ring is the same-agent pairs and the pairs i -> i+shift.
func ring(shift int) pairSet {
	if os.Getenv("CAST_MATRIX") == "full" {
		return everyPair
	}
	return pairSet{shift: shift}
}

func (p pairSet) has(src, tgt int) bool {
	if p.shift < 0 || src == tgt {
		return true
	}
	return tgt == (src+p.shift)%len(runnable)
}

// TestFeatureMatricesCoverEveryPair: the four feature matrices' shifts
// between them resume every cross pair, and each matrix gives every agent
// as a source and a target.
func TestFeatureMatricesCoverEveryPair(t *testing.T) {
	n := len(runnable)
	covered := map[[2]int]bool{}
	for _, shift := range featureShifts {
		p := pairSet{shift: shift}
		asSrc, asTgt := make([]int, n), make([]int, n)
		for i := range n {
			for j := range n {
				if p.has(i, j) {
					asSrc[i]++
					asTgt[j]++
					covered[[2]int{i, j}] = true
				}
			}
		}
		for a := range n {
			if asSrc[a] != 2 || asTgt[a] != 2 {
				t.Errorf("shift %d: %s is a source %d times and a target %d times, want 2 and 2", shift, runnable[a], asSrc[a], asTgt[a])
			}
		}
	}
	if len(covered) != n*n {
		t.Errorf("the feature matrices cover %d of %d pairs", len(covered), n*n)
	}
}
