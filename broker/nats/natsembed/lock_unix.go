//go:build unix

package natsembed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dirLock is an exclusive lock on a directory: flock on the file
// LockFile in it, which the kernel releases when the file is closed or
// its process dies.
type dirLock struct {
	f *os.File
}

// lockDir takes dir's lock, making dir if missing, or returns an error
// wrapping ErrDirInUse when another open file (of this process or
// another) holds it.
func lockDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("natsembed: embedded store %s: %w", dir, err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("natsembed: embedded store %s: lock file: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = "process " + strconv.Itoa(pid)
				if pid == os.Getpid() {
					holder = "this process (another Broker)"
				}
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is used by %s (lock file %s): %s", ErrDirInUse, dir, holder, path, dirInUseHint)
		}
		return nil, fmt.Errorf("natsembed: embedded store %s: lock %s: %w", dir, path, err)
	}
	// Who holds it, for the error of the next one that tries.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// release gives the lock back. The file stays: removing it would let a
// process lock a new file of the same name while another still holds the
// old one.
func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	err = errors.Join(err, l.f.Close())
	l.f = nil
	return err
}
