package testharness

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
)

// StartSelf runs the test binary again as a helper process that runs no
// test (an etcd member, an S3 server), handing it cfg as JSON in the
// environment variable env; the binary's TestMain makes it the helper
// when SelfConfig finds that variable.
func StartSelf(t testing.TB, env string, cfg any) *Proc {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatalf("helper process config: %v", err)
	}
	return StartProcEnv(t, []string{env + "=" + string(raw)}, os.Args[0], "-test.run=^$")
}

// SelfConfig is the config StartSelf handed this process in env; false
// when the process is no helper (a test binary run as itself). A config
// that does not decode ends the process (exit 2), saying what it is
// for.
func SelfConfig[T any](env, what string) (T, bool) {
	var cfg T
	raw := os.Getenv(env)
	if raw == "" {
		return cfg, false
	}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, what+" config:", err)
		os.Exit(2)
	}
	return cfg, true
}

// Slot holds what a test stops and starts again on the same data and
// ports (a helper process, an embedded etcd): what runs now, the zero
// value while down. Safe for concurrent use.
type Slot[T comparable] struct {
	mu  sync.Mutex
	cur T
}

// Start starts one with start, unless one runs (that one is returned),
// the lock held throughout, so a Stop meanwhile waits and stops the new
// one.
func (s *Slot[T]) Start(start func() (T, error)) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero T
	if s.cur != zero {
		return s.cur, nil
	}
	v, err := start()
	if err != nil {
		return zero, err
	}
	s.cur = v
	return v, nil
}

// Now is what runs now (the zero value while down).
func (s *Slot[T]) Now() T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Stop stops what runs with stop; it is then down (a no-op while it is).
func (s *Slot[T]) Stop(stop func(T)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero T
	if s.cur != zero {
		stop(s.cur)
		s.cur = zero
	}
}
