package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/ingest/blob"
)

// Blobs are the containers that hold incoming/, processed/ and failed/
// instead of the data directory (Config.Blobs). Each is a container, or
// a folder of one; they may be folders of one container. The job id of a
// blob is SHA-256 of "incoming", its path under Incoming and the store's
// ETag; processed/ and failed/ keep the layout they have in the data
// directory.
type Blobs struct {
	Incoming, Processed, Failed *blob.Bucket
}

// locate is the container and the key of rel, a path under the data
// directory ("incoming/notes/a.txt").
func (s *Service) locate(rel string) (*blob.Bucket, string) {
	top, key, _ := cutFirst(rel)
	switch top {
	case IncomingDir:
		return s.blobs.Incoming, key
	case ProcessedDir:
		return s.blobs.Processed, key
	case FailedDir:
		return s.blobs.Failed, key
	}
	panic("pipeline: no container for " + rel)
}

// where is rel for people: a path of the data directory, or the blob's
// URL.
func (s *Service) where(rel string) string {
	if s.blobs == nil {
		return filepath.Join(s.cfg.DataDir, filepath.FromSlash(rel))
	}
	b, key := s.locate(rel)
	return b.String() + "/" + key
}

// blobMoveIfSame is moveIfSame on the containers: a copy of the version
// etag ("" for any) then a delete of that version only.
func (s *Service) blobMoveIfSame(ctx context.Context, src, dst, etag string) (bool, error) {
	sb, sk := s.locate(src)
	db, dk := s.locate(dst)
	return blob.Move(ctx, sb, sk, db, dk, etag)
}

// writeFile writes b to name (under the data directory, or its blob),
// whole or not at all, with mode perm on a disk.
func (s *Service) writeFile(ctx context.Context, name string, b []byte, perm fs.FileMode) error {
	if s.blobs == nil {
		return s.writeFileAtomic(name, b, perm)
	}
	bk, key := s.locate(name)
	return bk.WriteAll(ctx, key, b, nil)
}

// removeAll removes the folder dir of failed/ and what it holds.
func (s *Service) removeAll(ctx context.Context, dir string) error {
	if s.blobs == nil {
		return s.root.RemoveAll(dir)
	}
	b, key := s.locate(dir)
	return b.DeletePrefix(ctx, key+"/")
}

// rename moves src to dst, whatever version src is; a missing src is
// not an error.
func (s *Service) rename(ctx context.Context, src, dst string) error {
	if s.blobs != nil {
		_, err := s.blobMoveIfSame(ctx, src, dst, "")
		return err
	}
	if err := s.root.MkdirAll(path.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := s.root.Rename(src, dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// skipped reports whether the scan leaves the file at rel (under
// incoming/) alone: hidden, in a hidden folder, or being written (.tmp,
// .part).
func skipped(rel string) bool {
	for _, part := range strings.Split(rel, "/") {
		if strings.HasPrefix(part, ".") {
			return true
		}
	}
	return strings.HasSuffix(rel, ".tmp") || strings.HasSuffix(rel, ".part")
}

// scanBlobs is Scan on the incoming container: a blob appears whole, so
// none waits to settle.
func (s *Service) scanBlobs(ctx context.Context) ([]Scanned, error) {
	var out []Scanned
	present := map[string]bool{}
	err := s.blobs.Incoming.List(ctx, func(o blob.Attrs) error {
		if skipped(o.Key) {
			return nil
		}
		present[o.Key] = true
		if s.seenAlike(o.Key, o.Size, o.ModTime) {
			return nil
		}
		sc, err := s.enqueueBlob(ctx, o.Key)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // moved away since the listing
		}
		if err != nil {
			var down *blob.UnavailableError
			if errors.As(err, &down) {
				return err // the next scan tries again
			}
			s.log.Error("enqueue a blob of incoming/", "path", cleanText(o.Key), "err", err)
			return nil
		}
		s.remember(o.Key, seenFile{size: o.Size, modTime: o.ModTime, id: sc.ID})
		out = append(out, sc)
		return nil
	})
	if err == nil {
		s.forgetAbsent(present)
	}
	return out, err
}

// enqueueBlob is enqueue for the blob at rel in the incoming container:
// its ETag is the store's.
func (s *Service) enqueueBlob(ctx context.Context, rel string) (Scanned, error) {
	a := parseArgs{Path: rel, Source: sourceOf(rel)}
	if s.beforeOpen != nil {
		s.beforeOpen(rel)
	}
	at, err := s.blobs.Incoming.Attributes(ctx, rel)
	if err != nil {
		return Scanned{}, err
	}
	if at.Size > s.cfg.MaxFileSize {
		a.Poison = (&TooLargeError{Size: at.Size, Limit: s.cfg.MaxFileSize}).Error()
	}
	a.ETag = at.ETag
	return s.insertParse(ctx, rel, a)
}

// opened is the file of a parse job, open for reading.
type opened struct {
	r    io.ReadCloser
	size int64
	// version orders the versions of a path: when it was written, in
	// nanoseconds since the Unix epoch.
	version int64
	// same reports, once r has been read to its end, whether what was
	// read is the job's version (sum is its SHA-256, in hex): nil, or
	// errChanged.
	same func(ctx context.Context, sum string) error
}

// openBlobVersion opens the blob of a parse job: in the incoming
// container, only the version of its ETag; or, after its failure was
// requeued, in the failed container, where its move recorded that ETag.
func (s *Service) openBlobVersion(ctx context.Context, a parseArgs) (opened, error) {
	r, err := s.blobs.Incoming.NewReader(ctx, a.Path, a.ETag)
	if errors.Is(err, fs.ErrNotExist) {
		_, key := s.locate(path.Join(failedDir(a.Source, a.Path, ""), path.Base(a.Path)))
		var at blob.Attrs
		at, err = s.blobs.Failed.Attributes(ctx, key)
		if err == nil && at.Meta[blob.ETagMeta] != a.ETag {
			err = fmt.Errorf("%s: the copy in %s/ is not the version of the job: %w", a.Path, FailedDir, fs.ErrNotExist)
		}
		if err == nil {
			r, err = s.blobs.Failed.NewReader(ctx, key, at.ETag)
		}
	}
	if errors.Is(err, blob.ErrChanged) {
		return opened{}, errChanged
	}
	if err != nil {
		return opened{}, err
	}
	return opened{r: r, size: r.Size(), version: r.ModTime().UnixNano(), same: func(ctx context.Context, _ string) error {
		if err := r.Check(ctx); errors.Is(err, blob.ErrChanged) {
			return errChanged
		} else if err != nil {
			return err
		}
		return nil
	}}, nil
}

// blobUnavailable is the snooze of a job that met the blob store down:
// it waits without spending an attempt, and nothing it holds is lost.
func (s *Service) blobUnavailable(err error) (error, bool) {
	var down *blob.UnavailableError
	if !errors.As(err, &down) {
		return err, false
	}
	wait := max(down.RetryIn, s.cfg.PollEvery, time.Second)
	s.log.Warn("the blob store is unavailable; the job waits", "err", err, "retry_in", wait)
	return weir.JobSnooze(wait), true
}

// uploadIn copies the file at src (a path the caller of Ingest named) to
// rel in the incoming container.
func (s *Service) uploadIn(ctx context.Context, src, rel string) error {
	in, _, err := openRegular(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return s.blobs.Incoming.Upload(ctx, rel, in, "", nil)
}
