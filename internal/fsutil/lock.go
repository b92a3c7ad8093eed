package fsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockName is the lock file's name inside a locked dir.
const LockName = "cast.lock"

// ErrLocked is wrapped by LockDir's error when another process holds the dir.
var ErrLocked = errors.New("data dir is in use")

// LockDir takes dir's lock without waiting and records this process's pid
// in it. When another process holds it, the error names that process: a
// second daemon on the same data dir must say so and exit, never wait
// (embedded etcd would block on its own lock, deaf to signals).
func LockDir(dir string) (*FileLock, error) {
	if dir == "" {
		// filepath.Join would lock ./cast.lock: never the data dir meant.
		return nil, errors.New("lock: no data dir given")
	}
	path := filepath.Join(dir, LockName)
	f, err := openLock(path)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = "process " + strconv.Itoa(pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s holds %s; stop it, or use another --data-dir", ErrLocked, holder, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &FileLock{f: f}, nil
}

// FileLock is a hold on a lock file: a daemon's on its data dir
// (LockDir), or one of several processes' on a file they share (LockFile:
// a writer exclusive, readers shared). The kernel drops it when the
// process dies, so a crash never leaves a stale lock behind.
type FileLock struct{ f *os.File }

// LockFile waits for path's lock (made if missing, 0600), exclusive or
// shared.
func LockFile(path string, exclusive bool) (*FileLock, error) {
	f, err := openLock(path)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &FileLock{f: f}, nil
}

// openLock opens path to lock it, making it (0600) and its folder (0700)
// if missing.
func openLock(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
}

// Unlock releases the hold (closing the file drops the flock).
func (l *FileLock) Unlock() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}
