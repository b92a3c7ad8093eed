package crossagent

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// pairSet selects which source->target pairs of the runnable agents a
// matrix resumes: every pair, or those whose target is the source's index
// plus one of shifts (mod the agent count); shift 0 is the same-agent pair.
//
// The CLIs' CPU is most of the default test run on two cores, so no
// matrix resumes all 25 pairs there; CAST_MATRIX=full runs every pair of
// every matrix. TestMatrix, whose sources the real CLIs produce, resumes
// one cross ring (matrixShift) and the own transcript of each agent whose
// package does not already resume one (ownElsewhere).
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
	own    []string // agents whose same-agent pair runs besides the shifts
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

// ownElsewhere are the agents whose own package resumes, with its real
// CLI, a session that CLI produced and cast read and wrote again:
// TestRealClaudeRoundTrip, Codex's TestE2ERealRolloutRoundTrip and
// OpenCode's TestE2ERoundTrip. TestMatrix's same-agent pair repeats that
// for them (OpenCode's the costliest pair of the run), so it runs for the
// others only, and for all with CAST_MATRIX=full.
var ownElsewhere = map[string]string{
	"claude":   "TestRealClaudeRoundTrip",
	"codex":    "TestE2ERealRolloutRoundTrip",
	"opencode": "TestE2ERoundTrip",
}

// matrixPairs is TestMatrix's pairs.
func matrixPairs() pairSet {
	p := ring(matrixShift)
	for _, a := range runnable {
		if _, ok := ownElsewhere[a]; !ok {
			p.own = append(p.own, a)
		}
	}
	return p
}

var featureShifts = []int{compactShift, imageShift, longShift, subagentShift}

// ring is the pairs i -> i+shift for each shift; every pair with
// CAST_MATRIX=full.
func ring(shifts ...int) pairSet {
	if agenttest.FullMatrix() {
		return everyPair
	}
	return pairSet{shifts: shifts}
}

func (p pairSet) has(src, tgt int) bool {
	n := len(runnable)
	return p.all || slices.Contains(p.shifts, (tgt-src+n)%n) || (src == tgt && slices.Contains(p.own, runnable[src]))
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

// TestOwnRoundTripsElsewhereExist: the tests ownElsewhere leaves each
// agent's own resume to are still in that agent's package.
func TestOwnRoundTripsElsewhereExist(t *testing.T) {
	for agent, test := range ownElsewhere {
		if !agenttest.HasTest(t, filepath.Join("..", agent, "*_test.go"), test) {
			t.Errorf("%s's package has no %s: TestMatrix must resume %s->%s again", agent, test, agent, agent)
		}
	}
}
