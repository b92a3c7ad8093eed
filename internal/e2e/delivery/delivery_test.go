// Package delivery is the model-based test of cast's delivery rule
// (docs/architecture.md, "Delivery rule"): random interleavings of send,
// interrupt, switch (to each of the five agents), fork, migrate, node kill
// -9, control plane kill -9, an agent CLI killed from outside (kill -9 or
// SIGTERM) and a service manager's stop of a node with its CLIs against a
// control plane process, two node
// processes, the real agent CLIs and one fake model per agent, checked by
// internal/deliverycheck from the fake models' request logs. It is its own
// package so its minutes add to no other package's.
//
// Flags (environment):
//
//	CAST_DELIVERY_SEED=S[,S2...]  run these seeds (default 28)
//	CAST_DELIVERY_SEEDS=N         run N seeds from the first of CAST_DELIVERY_SEED
//	                              (default: a random one, printed)
//	CAST_DELIVERY_STEPS=N         steps per seed (default 30)
//	CAST_DELIVERY_BATCH=N         steps between quiescence checks (default 15)
//	CAST_DELIVERY_KEEP_GOING=1    report each violation and run on to the last step
//	                              (the step log is printed at the end)
//	CAST_DELIVERY_LOGS=DIR        keep every control plane and node process's
//	                              output in DIR (seedS-NAME.log), failed or not,
//	                              and write the step log there as it goes
//	                              (seedS-steps.log)
//
// With -v the step log, stamped with seconds since the start, is printed
// for a passing seed too.
//
// A seed fixes the plan (each step's kind and choices); the processes'
// timing still varies, so a replay meets the same plan, not always the
// same states.
package delivery

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// defaultSeed's 30-step plan draws every kind of step (TestDefaultPlan).
const (
	defaultSeed  = 28
	defaultSteps = 30
	defaultBatch = 15
)

func TestDeliveryRule(t *testing.T) {
	steps, batch := envInt(t, "CAST_DELIVERY_STEPS", defaultSteps), envInt(t, "CAST_DELIVERY_BATCH", defaultBatch)
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runSeed(t, seed, steps, batch) })
	}
}

func runSeed(t *testing.T, seed uint64, steps, batch int) {
	p := plan(seed, steps)
	t.Logf("seed %d, %d steps:%s", seed, steps, summary(p))
	r := newRig(t, seed, steps, batch)
	r.create("claude", r.nodes[0].Name)
	r.create("codex", r.nodes[1].Name)
	for i, st := range p {
		r.apply(i+1, st)
		if (i+1)%batch == 0 || i+1 == len(p) {
			r.quiesce(i + 1)
		}
	}
	t.Logf("seed %d: signal faults as they landed: %s", seed, r.landed())
	if t.Failed() {
		t.Logf("seed %d, steps:\n%s", seed, r.rec.stepLog())
		return
	}
	if testing.Verbose() {
		t.Logf("seed %d, steps:\n%s", seed, r.rec.stepLog()) // where a run's time went
	}
	h := r.rec.history()
	t.Logf("seed %d: the rule held over %d steps, %d messages, %d model requests, %d faults, %d probes",
		seed, steps, len(h.Messages), len(h.Requests), len(h.Faults), len(h.Probes))
}

// The default run exercises every kind of step.
func TestDefaultPlan(t *testing.T) {
	p := plan(defaultSeed, defaultSteps)
	seen := map[kind]bool{}
	for _, s := range p {
		seen[s.k] = true
	}
	for _, w := range weights {
		if !seen[w.k] {
			t.Errorf("the default plan has no %s step:%s", w.k, summary(p))
		}
	}
}

func seeds(t *testing.T) []uint64 {
	var out []uint64
	for _, f := range strings.Split(os.Getenv("CAST_DELIVERY_SEED"), ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		s, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("CAST_DELIVERY_SEED: %q is not a seed", f)
		}
		out = append(out, s)
	}
	n := envInt(t, "CAST_DELIVERY_SEEDS", 0)
	if n == 0 {
		if len(out) == 0 {
			out = []uint64{defaultSeed}
		}
		return out
	}
	base := rand.Uint64() >> 16 // short enough to type back
	if len(out) > 0 {
		base = out[0]
	}
	t.Logf("seeds %d..%d", base, base+uint64(n)-1)
	out = out[:0]
	for i := range n {
		out = append(out, base+uint64(i))
	}
	return out
}

func envInt(t *testing.T, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s: %q is not a count", key, v)
	}
	return n
}
