package runner

import (
	"context"
	"errors"
	"testing"
	"time"
)

// One holder per key; a waiter gets the key when it is released, or gives
// up with its context; other keys are not held up.
func TestKeyedLock(t *testing.T) {
	k := &keyedLock{held: map[string]chan struct{}{}}
	ctx := context.Background()
	unlockA, err := k.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := k.Lock(ctx, "b") // another key: not held up
	if err != nil {
		t.Fatal(err)
	}
	unlockB()

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := k.Lock(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held key = %v, want the context's end", err)
	}

	got := make(chan func(), 1)
	go func() {
		unlock, err := k.Lock(ctx, "a")
		if err != nil {
			t.Error(err)
		}
		got <- unlock
	}()
	select {
	case <-got:
		t.Fatal("a second holder got a held key")
	case <-time.After(100 * time.Millisecond): // how long the waiter is given to be wrong
	}
	unlockA()
	select {
	case unlock := <-got:
		unlock()
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never got the released key")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.held) != 0 {
		t.Fatalf("keys still held: %v", k.held)
	}
}
