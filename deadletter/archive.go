package deadletter

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// ErrArchive is matched (errors.Is) by every error from writing an archive
// file: Enforce purged nothing that the failed archive was to hold.
var ErrArchive = errors.New("deadletter: archive failed")

// ArchiveError is an archive file that could not be written. It matches
// ErrArchive and unwraps to the cause, such as fs.ErrNotExist or
// fs.ErrPermission.
type ArchiveError struct {
	// Dir is the archive directory.
	Dir string
	// Op is what failed: "check directory", "create", "write", "sync",
	// "close", "rename" or "sync directory".
	Op string
	// Err is the cause.
	Err error
}

func (e *ArchiveError) Error() string {
	return fmt.Sprintf("deadletter: archive in %s: %s: %v", e.Dir, e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *ArchiveError) Unwrap() error { return e.Err }

// Is reports whether target is ErrArchive.
func (e *ArchiveError) Is(target error) bool { return target == ErrArchive }

// checkDir returns an *ArchiveError when dir is not an existing directory,
// so that a misconfigured ArchiveDir shows at the first run, due or not.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err // the path is the directory, which the error names
	}
	switch {
	case err != nil:
		return &ArchiveError{Dir: dir, Op: "check directory", Err: err}
	case !fi.IsDir():
		return &ArchiveError{Dir: dir, Op: "check directory", Err: errors.New("it is not a directory")}
	}
	return nil
}

// tempPattern names unfinished archives: hidden, and not matching
// dead-letters-*.jsonl, so that nothing mistakes one for an archive.
const tempPattern = ".dead-letters-*.tmp"

// maxNameTries bounds the search for a free archive name.
const maxNameTries = 1000

// archive is one archive file being written: a temporary file, created at
// the first record, until commit gives it its name.
type archive struct {
	dir    string
	now    time.Time
	logger *slog.Logger

	f   *os.File
	bw  *bufio.Writer
	enc *json.Encoder
}

// add appends rec to the archive, creating the temporary file first.
func (a *archive) add(rec Record) error {
	if a.f == nil {
		f, err := os.CreateTemp(a.dir, tempPattern) // mode 0600
		if err != nil {
			return a.fail("create", err)
		}
		a.f = f
		a.bw = bufio.NewWriterSize(f, 64<<10)
		a.enc = newEncoder(a.bw)
	}
	if err := a.enc.Encode(rec); err != nil {
		return a.fail("write", err)
	}
	return nil
}

// commit makes the archive durable under its final name and returns the
// name's path. On an error the temporary file is removed, except after the
// final name is taken: the file there is complete, and is left.
func (a *archive) commit() (string, error) {
	if err := a.bw.Flush(); err != nil {
		return "", a.fail("write", err)
	}
	if err := a.f.Sync(); err != nil {
		return "", a.fail("sync", err)
	}
	tmp := a.f.Name()
	err := a.f.Close()
	a.f = nil
	if err != nil {
		os.Remove(tmp)
		return "", &ArchiveError{Dir: a.dir, Op: "close", Err: err}
	}
	path, err := a.publish(tmp)
	if err != nil {
		os.Remove(tmp)
		return "", &ArchiveError{Dir: a.dir, Op: "rename", Err: err}
	}
	if err := syncDir(a.dir); err != nil {
		return "", &ArchiveError{Dir: a.dir, Op: "sync directory", Err: fmt.Errorf("%s is written but may not survive a crash: %w", path, err)}
	}
	return path, nil
}

// publish gives the complete temporary file tmp the archive's name,
// dead-letters-<UTC time>.jsonl, or that name with -1, -2, ... before the
// extension when it is taken; it never replaces an existing file, which
// would lose an earlier archive. A hard link fails when the name exists,
// atomically; where the file system has no hard links, it renames after
// checking that the name is free (replacing only a file that another
// process made in between).
func (a *archive) publish(tmp string) (string, error) {
	base := "dead-letters-" + a.now.UTC().Format("20060102T150405.000000Z")
	for i := range maxNameTries {
		name := base + ".jsonl"
		if i > 0 {
			name = fmt.Sprintf("%s-%d.jsonl", base, i)
		}
		path := filepath.Join(a.dir, name)
		err := os.Link(tmp, path)
		if err == nil {
			if err := os.Remove(tmp); err != nil {
				// A second name for the same complete file: harmless.
				a.logger.Warn("dead-letter archive: remove temporary name", "file", tmp, "err", err)
			}
			return path, nil
		}
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		switch _, serr := os.Lstat(path); {
		case serr == nil:
			continue
		case !errors.Is(serr, fs.ErrNotExist):
			return "", serr
		}
		if err := os.Rename(tmp, path); err != nil {
			return "", err
		}
		return path, nil
	}
	return "", fmt.Errorf("%s.jsonl and %d more names are taken", base, maxNameTries-1)
}

// abort removes the unfinished archive, if one was started.
func (a *archive) abort() {
	if a.f == nil {
		return
	}
	a.f.Close()
	os.Remove(a.f.Name())
	a.f = nil
}

// fail aborts the archive and returns the error of op.
func (a *archive) fail(op string, err error) error {
	a.abort()
	return &ArchiveError{Dir: a.dir, Op: op, Err: err}
}

// syncDir fsyncs the directory dir, so that a name made or removed in it
// survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
