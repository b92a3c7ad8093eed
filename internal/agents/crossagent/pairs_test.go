package crossagent

import (
	"os"
	"slices"
	"testing"
)

// pairSet selects which source->target pairs of the runnable agents a
// matrix resumes: every pair, or those whose target is the source's index
// plus one of shifts (mod the agent count); shift 0 is the same-agent pair.
//
// The CLIs' CPU is most of the default test run on two cores, so no
// matrix resumes all 25 pairs there; CAST_MATRIX=full runs every pair of
// every matrix. TestMatrix, whose sources the real CLIs produce, resumes
// each agent's own transcript (shift 0) and one cross ring (matrixShift).
// The matrices whose conversations are written by hand (TestMatrixHard and
// the features: compaction, images, a long turn, a subagent run) each take
// a cross ring of their own, so every agent is once a source and once a
// target of each, and between them the features resume every cross pair.
// A same-agent pair adds nothing to such a matrix that its ring lacks: the
// source step already writes the conversation in each agent's format and
// reads it back with that agent's reader, the ring resumes it with each
// agent's writer and CLI, and TestMatrix resumes every agent from its own
// transcript.
type pairSet struct {
	all    bool
	shifts []int
}

var everyPair = pairSet{all: true}

// The feature matrices' shifts: all different, so that between them they
// cover every cross pair (TestFeatureMatricesCoverEveryPair).
const (
	compactShift  = 1
	imageShift    = 2
	longShift     = 3
	subagentShift = 4
)

// hardShift is TestMatrixHard's ring: every agent's writer, reader and
// CLI get the hard conversation, from one other agent each; its content
// (markup-like text, parallel calls, a 50 KB output) reaches the other
// pairs only with CAST_MATRIX=full, a trade for the default run's time.
const hardShift = 1

// matrixShift is TestMatrix's cross ring: each real CLI's own conversation
// resumed in one other agent's CLI (the rest with CAST_MATRIX=full; the
// hand-written feature matrices carry every cross pair).
const matrixShift = 2

var featureShifts = []int{compactShift, imageShift, longShift, subagentShift}

// ring is the pairs i -> i+shift for each shift; every pair with
// CAST_MATRIX=full.
func ring(shifts ...int) pairSet {
	if os.Getenv("CAST_MATRIX") == "full" {
		return everyPair
	}
	return pairSet{shifts: shifts}
}

func (p pairSet) has(src, tgt int) bool {
	n := len(runnable)
	return p.all || slices.Contains(p.shifts, (tgt-src+n)%n)
}

// TestFeatureMatricesCoverEveryPair: the four feature matrices' shifts
// between them resume every cross pair and no same-agent pair, and each
// matrix gives every agent once as a source and once as a target.
func TestFeatureMatricesCoverEveryPair(t *testing.T) {
	n := len(runnable)
	covered := map[[2]int]bool{}
	for _, shift := range featureShifts {
		p := pairSet{shifts: []int{shift}}
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
