package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/parse"
	"github.com/weirhq/weir/weirtype"
)

// seenFile is a file of incoming/ as the last scan found it.
type seenFile struct {
	size    int64
	modTime time.Time
	id      string
}

// settleAfter is how long a file must go unmodified before a scan takes
// it: a file still being written is left for a later scan.
const settleAfter = time.Second

// Scanned is a file a scan enqueued.
type Scanned struct {
	ID, Path string
	Outcome  weirtype.InsertOutcome
}

// Scan walks incoming/ and enqueues a parse job for each file it has not
// enqueued yet, keyed by the file's id, so that a file enqueued twice (by
// two processes, or copied in again) makes one job. Hidden files and
// files ending in .tmp or .part are skipped, as are files modified in the
// last second (still being written). A file copied in again after it was
// processed is moved to processed/, as its first copy was; after it
// failed, to failed/.
func (s *Service) Scan(ctx context.Context) ([]Scanned, error) {
	root := filepath.Join(s.cfg.DataDir, IncomingDir)
	now := s.cfg.Clock.Now()
	var out []Scanned
	present := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist):
			return nil // moved away during the walk
		case p == root:
			return err
		default:
			// One unreadable folder or file does not stop the scan of
			// the others.
			s.log.Error("scan incoming/: skipped", "path", p, "err", err)
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if p != root && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() || strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".part") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return nil // gone since the walk listed it
		}
		present[rel] = true
		if now.Sub(info.ModTime()) < settleAfter {
			return nil
		}
		s.seenMu.Lock()
		prev, ok := s.seen[rel]
		s.seenMu.Unlock()
		if ok && prev.size == info.Size() && prev.modTime.Equal(info.ModTime()) {
			return nil
		}
		sc, err := s.enqueue(ctx, p, rel)
		if err != nil {
			s.log.Error("enqueue a file of incoming/", "path", rel, "err", err)
			return nil
		}
		s.seenMu.Lock()
		s.seen[rel] = seenFile{size: info.Size(), modTime: info.ModTime(), id: sc.ID}
		s.seenMu.Unlock()
		out = append(out, sc)
		return nil
	})
	s.seenMu.Lock()
	for p := range s.seen {
		if !present[p] {
			delete(s.seen, p)
		}
	}
	s.seenMu.Unlock()
	return out, err
}

// enqueue inserts the parse job of the file at p (rel under incoming/).
func (s *Service) enqueue(ctx context.Context, p, rel string) (Scanned, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return Scanned{}, err
	}
	etag := ETag(data)
	id := FileID(rel, etag)
	res, err := s.client.Insert(ctx, parseArgs{File: id, Path: rel, ETag: etag, Source: sourceOf(rel)},
		&weir.InsertOpts{IdempotencyKey: id, Source: IncomingDir + "/" + rel})
	if err != nil {
		return Scanned{}, err
	}
	sc := Scanned{ID: id, Path: rel, Outcome: res.Outcome}
	if res.Outcome == weirtype.DuplicateCompleted || res.Outcome == weirtype.DuplicateFinal {
		// The same content was processed, or failed, before: this copy
		// changes nothing, and leaves incoming/ as the first did.
		f, err := s.db.file(ctx, id)
		if errors.Is(err, ErrNotFound) && res.Outcome == weirtype.DuplicateCompleted {
			// Its parse job ended without a file: the content had
			// changed under it then, and is back now. It runs again.
			if _, err := s.cfg.DB.Store.Executor().RetryJob(ctx, s.cfg.Clock.Now(), res.Job.ID); err != nil {
				return sc, fmt.Errorf("run again the parse of %s, whose content is back: %w", rel, err)
			}
			s.log.Info("file content seen before, never parsed; its parse runs again", "path", rel, "job_id", res.Job.ID)
			return sc, nil
		}
		if err == nil && (f.Status == fileProcessed || f.Status == fileFailed) {
			dst := filepath.Join(s.cfg.DataDir, ProcessedDir, filepath.FromSlash(rel))
			if f.Status == fileFailed {
				dst = filepath.Join(s.failedDir(f.Source, f.Path, ""), path.Base(rel))
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
				_ = os.Rename(p, dst)
			}
		}
	}
	return sc, nil
}

// Ingest copies the files at paths (files, or folders walked for files)
// into incoming/{source}/, each written under a temporary name and renamed
// into place, and enqueues them at once. Paths inside a folder keep their
// place under it. Files in a folder whose format weir does not read (by
// extension) are skipped and returned apart; a file named on its own is
// copied whatever it is, and fails to failed/ if weir cannot read it. It
// returns the files enqueued and those skipped.
func (s *Service) Ingest(ctx context.Context, source string, paths []string) (enqueued []Scanned, skipped []string, err error) {
	if source == "" || strings.ContainsAny(source, `/\`) || strings.HasPrefix(source, ".") {
		return nil, nil, fmt.Errorf("pipeline: ingest: source %q: want a plain folder name", source)
	}
	var out []Scanned
	for _, root := range paths {
		info, err := os.Stat(root)
		if err != nil {
			return out, skipped, fmt.Errorf("pipeline: ingest: %w", err)
		}
		base := filepath.Dir(root)
		if info.IsDir() {
			base = root
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != root && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || !d.Type().IsRegular() {
				return nil
			}
			if p != root && parse.Format(d.Name()) == "" {
				skipped = append(skipped, p)
				return nil
			}
			rel, err := filepath.Rel(base, p)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(filepath.Join(source, rel))
			dst := filepath.Join(s.cfg.DataDir, IncomingDir, filepath.FromSlash(rel))
			if err := copyFile(p, dst); err != nil {
				return err
			}
			sc, err := s.enqueue(ctx, dst, rel)
			if err != nil {
				return err
			}
			if info, err := os.Stat(dst); err == nil {
				s.seenMu.Lock()
				s.seen[rel] = seenFile{size: info.Size(), modTime: info.ModTime(), id: sc.ID}
				s.seenMu.Unlock()
			}
			out = append(out, sc)
			return ctx.Err()
		})
		if err != nil {
			return out, skipped, fmt.Errorf("pipeline: ingest %s: %w", root, err)
		}
	}
	return out, skipped, nil
}

// copyFile copies src to dst through a temporary file renamed into place,
// so a scan never sees half a file.
func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}
