package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// WorkersDir is the folder of the data directory that holds the worker
// slots' lock files.
const WorkersDir = "workers"

// maxSlots bounds the slots tried: more processes than this on one data
// directory and one host is a mistake.
const maxSlots = 256

// ErrNoSlot: every worker slot of the data directory is held.
var ErrNoSlot = errors.New("pipeline: every worker slot of the data directory is held")

// workerSlot is the default worker id of a process on the data directory
// dataDir, and the lock that keeps it: "{hostname}-{hash}-{slot}", where
// hash is 8 hex digits of SHA-256 of the directory's absolute path and
// slot the lowest number n whose file workers/n.lock this process could
// lock (flock, exclusive, not waiting). Two processes running at once on
// one directory take different slots, hence different ids; a process
// restarted after a crash finds its slot free again (the kernel drops a
// dead process's locks), takes the same id back, and with it at once the
// jobs its previous run left running. The lock lasts until the returned
// file is closed.
func workerSlot(dataDir string) (string, *os.File, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", nil, err
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	sum := sha256.Sum256([]byte(abs))
	dir := filepath.Join(abs, WorkersDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	for slot := range maxSlots {
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(slot)+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return "", nil, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return fmt.Sprintf("%s-%s-%d", host, hex.EncodeToString(sum[:4]), slot), f, nil
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return "", nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
	}
	return "", nil, fmt.Errorf("%w (%d slots in %s)", ErrNoSlot, maxSlots, dir)
}
