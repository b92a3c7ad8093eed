package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// An exclusive hold keeps every other hold off until it is released; shared
// holds go together.
func TestLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.lock")
	try := func(how int) error {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	}
	ex, err := LockFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v %v", fi, err)
	}
	if err := try(syscall.LOCK_SH); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("a shared hold beside an exclusive one: %v", err)
	}
	ex.Unlock()
	sh, err := LockFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Unlock()
	if err := try(syscall.LOCK_SH); err != nil {
		t.Fatalf("two shared holds: %v", err)
	}
	if err := try(syscall.LOCK_EX); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("an exclusive hold beside a shared one: %v", err)
	}
}

// An empty dir is refused: the lock would land in the working folder.
func TestLockDirRefusesNoDir(t *testing.T) {
	if l, err := LockDir(""); err == nil {
		l.Unlock()
		t.Fatal("LockDir(\"\") took a lock")
	}
	if _, err := os.Stat(LockName); err == nil {
		t.Fatalf("LockDir(\"\") left %s in the working folder", LockName)
	}
}
