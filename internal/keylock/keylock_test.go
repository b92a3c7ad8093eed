package keylock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// One holder per key; a waiter gets the key when it is released, or gives
// up with its context; other keys are not held up.
func TestLocks(t *testing.T) {
	var k Locks
	ctx := context.Background()
	unlockA, err := k.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := k.TryLock("a"); ok {
		t.Fatal("TryLock took a held key")
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
		if _, ok := k.TryLock("a"); ok {
			t.Fatal("TryLock took a key the waiter holds")
		}
		unlock()
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never got the released key")
	}
	k.mu.Lock()
	left := len(k.held)
	k.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d keys still held", left)
	}
	unlock, ok := k.TryLock("a")
	if !ok {
		t.Fatal("TryLock did not take a free key")
	}
	unlock()
}
