package pipeline

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// The service reads and writes the data directory through an os.Root
// opened on it, so that no path (a file name, or a folder of incoming/
// swapped for a symbolic link between a check and a use) reaches outside
// it; and it opens the files it reads with O_NOFOLLOW, then checks that
// what it opened is a regular file, the one it checked, reached through
// no symbolic link. Paths below are slash-separated and relative to the
// data directory ("incoming/notes/a.txt").

// ErrNotRegular: a file of incoming/ is a symbolic link, a device or a
// pipe, or is reached through a symbolic link, or changed between its
// check and its opening. The service does not read it.
var ErrNotRegular = errors.New("pipeline: not a regular file reached without symbolic links")

// openRegular opens the file at rel under the data directory for reading,
// following no symbolic link: each folder on the way must be a folder, the
// file itself a regular file. If seen is not nil (what a scan found at
// rel), the file opened must be that very file. It returns the open file
// and its information.
func (s *Service) openRegular(rel string, seen fs.FileInfo) (*os.File, fs.FileInfo, error) {
	for dir := path.Dir(rel); dir != "." && dir != "/"; dir = path.Dir(dir) {
		fi, err := s.root.Lstat(dir)
		if err != nil {
			return nil, nil, err
		}
		if !fi.IsDir() {
			return nil, nil, fmt.Errorf("%s: %s is not a folder (a symbolic link?): %w", rel, dir, ErrNotRegular)
		}
	}
	// O_NONBLOCK: a pipe does not block the open; it is refused below.
	f, err := s.root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, fmt.Errorf("%s: a symbolic link: %w", rel, ErrNotRegular)
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	// The root follows symbolic links that stay inside it; a link in the
	// path shows as another file than the path's own.
	li, err := s.root.Lstat(rel)
	switch {
	case err != nil:
		f.Close()
		return nil, nil, err
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, nil, fmt.Errorf("%s: %s: %w", rel, fi.Mode().Type(), ErrNotRegular)
	case !li.Mode().IsRegular() || !os.SameFile(fi, li) || (seen != nil && !os.SameFile(fi, seen)):
		f.Close()
		return nil, nil, fmt.Errorf("%s: changed while it was opened (a symbolic link swapped in?): %w", rel, ErrNotRegular)
	}
	return f, fi, nil
}

// hashFile is the ETag of what r holds, read to its end a block at a
// time.
func hashFile(r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := io.CopyBuffer(h, r, make([]byte, 64<<10))
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// readLimited reads r, whose size was size when it was opened, to its end
// into one buffer, made large enough at once; a file that has grown
// beyond limit since is refused with a *TooLargeError, without reading
// the rest.
func readLimited(r io.Reader, size, limit int64) ([]byte, error) {
	// bytes.Buffer.ReadFrom grows its buffer whenever less than MinRead
	// bytes are free: leave them, so that the file is read in place.
	buf := bytes.NewBuffer(make([]byte, 0, min(size, limit)+bytes.MinRead+1))
	if _, err := buf.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	return buf.Bytes(), nil
}

// TooLargeError is the poison reason of a file larger than
// Config.MaxFileSize.
type TooLargeError struct {
	// Size is the file's size; 0 when it is not known (the file grew
	// past the limit as it was read).
	Size  int64
	Limit int64
}

func (e *TooLargeError) Error() string {
	if e.Size == 0 {
		return fmt.Sprintf("the file is larger than the limit of %s (MaxFileSize): it is not read", bytesString(e.Limit))
	}
	return fmt.Sprintf("the file is %s, more than the limit of %s (MaxFileSize): it is not read", bytesString(e.Size), bytesString(e.Limit))
}

// bytesString writes n bytes for people: 532 bytes, 12.5 KiB, 40.0 MiB.
func bytesString(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// moveIfSame moves the file at src to dst (both under the data
// directory) if it is a regular file whose content still has etag: a file
// changed in incoming/ since it was enqueued is a new version, which the
// scan enqueues, and stays. It reports whether it moved it; a missing src
// is not an error. The move keeps the file's mode.
func (s *Service) moveIfSame(ctx context.Context, src, dst, etag string) (bool, error) {
	if s.blobs != nil {
		return s.blobMoveIfSame(ctx, src, dst, etag)
	}
	f, fi, err := s.openRegular(src, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	got, _, err := hashFile(f)
	f.Close()
	if err != nil {
		return false, err
	}
	if got != etag {
		return false, nil
	}
	if err := s.root.MkdirAll(path.Dir(dst), 0o755); err != nil {
		return false, err
	}
	if err := s.root.Rename(src, dst); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	// Replaced between the check and the rename: put the newcomer back,
	// for the scan.
	if moved, err := s.root.Lstat(dst); err == nil && !os.SameFile(fi, moved) {
		if err := s.root.Rename(dst, src); err != nil {
			return false, fmt.Errorf("%s changed while it moved to %s, and could not be put back: %w", src, dst, err)
		}
		return false, nil
	}
	return true, nil
}

// sourceMode is the mode of the file a failure's files take theirs
// from: the original, where it is (incoming/, failed/ or processed/), or
// 0600 when it is nowhere.
func (s *Service) sourceMode(rels ...string) fs.FileMode {
	for _, rel := range rels {
		if fi, err := s.root.Lstat(rel); err == nil && fi.Mode().IsRegular() {
			return fi.Mode().Perm()
		}
	}
	return 0o600
}

// fileMode is the mode of a file written beside a source of mode src
// (error.json, an archive's message): readable by no one the source is
// not readable by, and readable and writable by its owner.
func fileMode(src fs.FileMode) fs.FileMode { return src&0o644 | 0o600 }

// dirMode is the mode of a failure's folder for a source of mode src:
// its owner's, and listable by those who may read the source.
func dirMode(src fs.FileMode) fs.FileMode {
	m := fs.FileMode(0o700)
	if src&0o040 != 0 {
		m |= 0o050
	}
	if src&0o004 != 0 {
		m |= 0o005
	}
	return m
}

// tempName is a name beside name for a file being written: hidden and
// ending in .tmp, which the scan skips, and of its own (two processes may
// write the same file at once).
func tempName(name string) string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return path.Join(path.Dir(name), "."+path.Base(name)+"."+hex.EncodeToString(r[:])+".tmp")
}

// writeFileAtomic writes b to name (under the data directory) with mode
// perm, through a temporary file renamed into place.
func (s *Service) writeFileAtomic(name string, b []byte, perm fs.FileMode) error {
	return s.writeAtomic(name, perm, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// writeAtomic makes name (under the data directory), with mode perm, of
// what write writes, through a temporary file renamed into place: a scan
// never sees half a file.
func (s *Service) writeAtomic(name string, perm fs.FileMode, write func(io.Writer) error) error {
	tmp := tempName(name)
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		// The umask may have taken bits away, never added any: set them
		// exactly.
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.root.Remove(tmp)
		return err
	}
	return s.root.Rename(tmp, name)
}

// openRegular opens the file at src, a path the caller of Ingest named,
// refusing anything but a regular file.
func openRegular(src string) (*os.File, os.FileInfo, error) {
	in, err := os.Open(src)
	if err != nil {
		return nil, nil, err
	}
	fi, err := in.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: %s, not a regular file", src, fi.Mode().Type())
	}
	if err != nil {
		in.Close()
		return nil, nil, err
	}
	return in, fi, nil
}

// copyIn copies the file at src (anywhere: a path the caller of Ingest
// named) to dst under the data directory, through a temporary file
// renamed into place so a scan never sees half a file. The copy is no
// more readable than src (and readable by its owner, who processes it).
func (s *Service) copyIn(src, dst string) error {
	in, fi, err := openRegular(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := s.root.MkdirAll(path.Dir(dst), 0o755); err != nil {
		return err
	}
	return s.writeAtomic(dst, fi.Mode().Perm()|0o600, func(w io.Writer) error {
		_, err := io.CopyBuffer(w, in, make([]byte, 64<<10))
		return err
	})
}
