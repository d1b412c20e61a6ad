package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/ingest/parse"
	"github.com/weirhq/weir/weirtype"
)

// seenFile is a file of incoming/ as the last scan found it.
type seenFile struct {
	size    int64
	modTime time.Time
	id      string
}

// seenAlike reports whether a scan saw rel before with this size and
// modification time: a file it enqueued already.
func (s *Service) seenAlike(rel string, size int64, modTime time.Time) bool {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	prev, ok := s.seen[rel]
	return ok && prev.size == size && prev.modTime.Equal(modTime)
}

// remember records that a scan enqueued rel as f.
func (s *Service) remember(rel string, f seenFile) {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	s.seen[rel] = f
}

// forgetAbsent drops the paths a scan saw before and no longer finds.
func (s *Service) forgetAbsent(present map[string]bool) {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	for p := range s.seen {
		if !present[p] {
			delete(s.seen, p)
		}
	}
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
// last second (still being written), and anything but a regular file (a
// symbolic link, a pipe): a file is opened without following links, and
// must be the file the walk found, reached through folders of the data
// directory only. A file copied in again after it was processed is moved
// to processed/, as its first copy was; after it failed, to failed/;
// after a newer version of its path, it is parsed again, as the newest.
func (s *Service) Scan(ctx context.Context) ([]Scanned, error) {
	if s.blobs != nil {
		return s.scanBlobs(ctx)
	}
	now := s.cfg.Clock.Now()
	var out []Scanned
	present := map[string]bool{}
	// The walk reads the data directory through its root: a folder of
	// incoming/ swapped for a link to elsewhere is not followed.
	err := fs.WalkDir(s.root.FS(), IncomingDir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist):
			return nil // moved away during the walk
		case p == IncomingDir:
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
		if p != IncomingDir && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() || strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".part") {
			return nil
		}
		rel := strings.TrimPrefix(p, IncomingDir+"/")
		info, err := d.Info()
		if err != nil {
			return nil // gone since the walk listed it
		}
		present[rel] = true
		if now.Sub(info.ModTime()) < settleAfter {
			return nil
		}
		if s.seenAlike(rel, info.Size(), info.ModTime()) {
			return nil
		}
		sc, err := s.enqueue(ctx, rel, info)
		if err != nil {
			s.log.Error("enqueue a file of incoming/", "path", cleanText(rel), "err", err)
			return nil
		}
		s.remember(rel, seenFile{size: info.Size(), modTime: info.ModTime(), id: sc.ID})
		out = append(out, sc)
		return nil
	})
	s.forgetAbsent(present)
	return out, err
}

// enqueue inserts the parse job of the file at rel under incoming/ (seen
// is what the scan found there; nil when there was no scan). The file is
// opened once, through no symbolic link, and read a block at a time for
// its ETag. A file whose name is not UTF-8, or larger than MaxFileSize,
// is enqueued as poison, which its parse refuses at once.
func (s *Service) enqueue(ctx context.Context, rel string, seen fs.FileInfo) (Scanned, error) {
	a := parseArgs{Path: cleanText(rel)}
	a.Source = sourceOf(a.Path)
	if a.Path != rel {
		a.RawPath = []byte(rel)
		a.Poison = "the file's name is not valid UTF-8, which weir cannot record: rename it"
	}
	if s.beforeOpen != nil {
		s.beforeOpen(rel)
	}
	f, fi, err := s.openRegular(path.Join(IncomingDir, rel), seen)
	if err != nil {
		return Scanned{}, err
	}
	defer f.Close()
	if fi.Size() > s.cfg.MaxFileSize && a.Poison == "" {
		a.Poison = (&TooLargeError{Size: fi.Size(), Limit: s.cfg.MaxFileSize}).Error()
	}
	if a.ETag, _, err = hashFile(f); err != nil {
		return Scanned{}, err
	}
	return s.insertParse(ctx, rel, a)
}

// insertParse inserts the parse job a of the file at rel under incoming/,
// whose ETag a names; a copy of content processed, or failed, before is
// moved where the first copy went.
func (s *Service) insertParse(ctx context.Context, rel string, a parseArgs) (Scanned, error) {
	a.File = FileID(rel, a.ETag)
	id := a.File
	res, err := s.client.Insert(ctx, a, &weir.InsertOpts{IdempotencyKey: id, Source: IncomingDir + "/" + a.Path})
	if err != nil {
		return Scanned{}, err
	}
	sc := Scanned{ID: id, Path: a.Path, Outcome: res.Outcome}
	if res.Outcome != weirtype.DuplicateCompleted && res.Outcome != weirtype.DuplicateFinal {
		return sc, nil
	}
	// The same content was processed, or failed, before.
	fr, err := s.db.file(ctx, id)
	again := errors.Is(err, ErrNotFound) && res.Outcome == weirtype.DuplicateCompleted
	if err == nil && res.Outcome == weirtype.DuplicateCompleted {
		// Back after a newer version of its path: the newest again.
		if again, err = s.db.replaced(ctx, fr); err != nil {
			return sc, err
		}
	}
	if again {
		// Its parse ended without a file (the content had changed under
		// it then), or a newer version replaced it since: it runs again.
		if _, err := s.cfg.DB.Store.Executor().RetryJob(ctx, s.cfg.Clock.Now(), res.Job.ID); err != nil {
			return sc, fmt.Errorf("run again the parse of %s, whose content is back: %w", a.Path, err)
		}
		s.log.Info("file content seen before is back; its parse runs again", "path", a.Path, "job_id", res.Job.ID)
		return sc, nil
	}
	if err == nil && (fr.Status == fileProcessed || fr.Status == fileFailed) {
		// This copy changes nothing, and leaves incoming/ as the first
		// did.
		dst := path.Join(ProcessedDir, rel)
		if fr.Status == fileFailed {
			dst = path.Join(failedDir(fr.Source, fr.Path, ""), path.Base(fr.Path))
		}
		if s.blobs != nil {
			_, _ = s.blobMoveIfSame(ctx, path.Join(IncomingDir, rel), dst, a.ETag)
		} else if err := s.root.MkdirAll(path.Dir(dst), 0o755); err == nil {
			_ = s.root.Rename(path.Join(IncomingDir, rel), dst)
		}
	}
	return sc, nil
}

// Ingest copies the files at paths (files, or folders walked for files)
// into incoming/{source}/, each written under a temporary name and renamed
// into place, no more readable than its original, and enqueues them at
// once. Paths inside a folder keep their place under it. Files in a
// folder whose format weir does not read (by extension) are skipped and
// returned apart; a file named on its own is copied whatever it is, and
// fails to failed/ if weir cannot read it. It returns the files enqueued
// and those skipped.
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
			if s.blobs != nil {
				if err := s.uploadIn(ctx, p, rel); err != nil {
					return err
				}
				sc, err := s.enqueueBlob(ctx, rel)
				if err != nil {
					return err
				}
				out = append(out, sc)
				return ctx.Err()
			}
			dst := path.Join(IncomingDir, rel)
			if err := s.copyIn(p, dst); err != nil {
				return err
			}
			sc, err := s.enqueue(ctx, rel, nil)
			if err != nil {
				return err
			}
			if info, err := s.root.Stat(dst); err == nil {
				s.remember(rel, seenFile{size: info.Size(), modTime: info.ModTime(), id: sc.ID})
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
