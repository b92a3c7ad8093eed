package crossagent

import (
	"os"
	"testing"
)

// pairSet selects which source->target pairs of the runnable agents a
// matrix resumes: shift < 0 is every pair; otherwise each source i with
// target i+shift (mod the agent count), and the same-agent pairs when
// same is set.
//
// TestMatrix carries every pair; TestMatrixHard, whose conversation is
// written by hand like the features', the ring hardShift with the
// same-agent pairs. Each feature matrix (compaction, images, a long turn,
// a subagent run) takes a different shift, 1 to 4, without the same-agent
// pairs, so between them every cross pair resumes some feature in every
// run and every feature reaches every agent's CLI from another agent's
// writer, at 5 resumes a matrix instead of 25. The same-agent pairs add
// nothing a feature needs beyond the ring: the source step already writes
// each feature in its agent's format and reads it back with that agent's
// reader, and TestMatrix and TestMatrixHard resume every agent from its
// own transcript. The CLIs' CPU is most of the default test run on two
// cores; CAST_MATRIX=full runs every pair of every matrix.
type pairSet struct {
	shift int
	same  bool
}

var everyPair = pairSet{shift: -1}

// The feature matrices' shifts: all different, so that between them they
// cover every cross pair (TestFeatureMatricesCoverEveryPair).
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

// ring is the pairs i -> i+shift, with the same-agent pairs when same is
// set; every pair with CAST_MATRIX=full.
func ring(shift int, same bool) pairSet {
	if os.Getenv("CAST_MATRIX") == "full" {
		return everyPair
	}
	return pairSet{shift: shift, same: same}
}

func (p pairSet) has(src, tgt int) bool {
	if p.shift < 0 {
		return true
	}
	if src == tgt {
		return p.same
	}
	return tgt == (src+p.shift)%len(runnable)
}

// TestFeatureMatricesCoverEveryPair: the four feature matrices' shifts
// between them resume every cross pair and no same-agent pair, and each
// matrix gives every agent once as a source and once as a target.
func TestFeatureMatricesCoverEveryPair(t *testing.T) {
	n := len(runnable)
	covered := map[[2]int]bool{}
	for _, shift := range featureShifts {
		p := pairSet{shift: shift}
		if p.has(0, 0) {
			t.Errorf("shift %d resumes the same-agent pairs", shift)
		}
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
			if asSrc[a] != 1 || asTgt[a] != 1 {
				t.Errorf("shift %d: %s is a source %d times and a target %d times, want 1 and 1", shift, runnable[a], asSrc[a], asTgt[a])
			}
		}
	}
	if len(covered) != n*(n-1) {
		t.Errorf("the feature matrices cover %d of %d cross pairs", len(covered), n*(n-1))
	}
}
