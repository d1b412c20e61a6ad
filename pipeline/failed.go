package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/weirhq/weir/internal/appdb"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// ErrorFile is error.json of a failure in failed/.
type ErrorFile struct {
	JobID     int64     `json:"jobId"`
	Path      string    `json:"path"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"lastError"`
	FailedAt  time.Time `json:"failedAt"`
}

// MetadataFile is metadata.json of a failure in failed/: the context the
// document failed in.
type MetadataFile struct {
	Stage        string                  `json:"stage"`
	DeadLetterID int64                   `json:"deadLetterId"`
	Reason       weirtype.AbandonReason  `json:"reason"`
	ErrorType    string                  `json:"errorType"`
	FileID       string                  `json:"fileId"`
	DocumentID   string                  `json:"documentId,omitempty"`
	Key          string                  `json:"key,omitempty"`
	Source       string                  `json:"source"`
	ETag         string                  `json:"etag,omitempty"`
	Format       string                  `json:"format,omitempty"`
	Meta         map[string]string       `json:"meta,omitempty"`
	Errors       []weirtype.AttemptError `json:"errors,omitempty"`
	Payload      json.RawMessage         `json:"payload"`
	Extra        map[string]any          `json:"extra,omitempty"`
}

// Sweep writes the documents dead-lettered since the last sweep to
// failed/, and moves to processed/ the files whose documents have all
// ended but that are still in incoming/ (a move that failed).
func (s *Service) Sweep(ctx context.Context) error {
	return errors.Join(s.sweepFailed(ctx), s.sweepOrphans(ctx))
}

// sweepFailed writes each dead-lettered parse, extract or save job not
// yet in weir_failures to failed/.
func (s *Service) sweepFailed(ctx context.Context) error {
	var errs []error
	for _, kind := range []string{KindParse, KindExtract, KindSave} {
		var after int64
		for {
			dls, err := s.cfg.DB.Store.Executor().ListDeadLetters(ctx, store.DeadLetterFilter{Kind: kind, AfterID: after, Limit: 100})
			if err != nil {
				return err
			}
			for _, dl := range dls {
				after = dl.ID
				done, err := s.db.count(ctx, `SELECT count(*) FROM weir_failures WHERE dead_letter_id = $1`, dl.ID)
				if err != nil {
					return err
				}
				if done > 0 {
					continue
				}
				if err := s.writeFailure(ctx, dl); err != nil {
					errs = append(errs, fmt.Errorf("write dead letter %d to %s/: %w", dl.ID, FailedDir, err))
				}
			}
			if len(dls) < 100 {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// writeFailure writes the dead letter dl to failed/{source}/{filename}/:
// the original (the file, moved there, or an archive's message), error.json
// and metadata.json; then records it written.
func (s *Service) writeFailure(ctx context.Context, dl *weirtype.DeadLetter) error {
	meta := MetadataFile{Stage: dl.Kind, DeadLetterID: dl.ID, Reason: dl.Reason, ErrorType: dl.ErrorType, Errors: dl.Errors, Payload: dl.Payload}
	var (
		relPath  string
		original []byte // an archive's message; nil to move the file itself
		fileID   string
		docDone  string // the document to mark failed
	)
	switch dl.Kind {
	case KindParse:
		var a parseArgs
		if err := json.Unmarshal(dl.Payload, &a); err != nil {
			return err
		}
		relPath, fileID, meta.FileID, meta.Source, meta.ETag = a.Path, a.File, a.File, a.Source, a.ETag
	default: // extract, save
		var a struct {
			Doc string `json:"doc"`
		}
		if err := json.Unmarshal(dl.Payload, &a); err != nil {
			return err
		}
		d, err := s.db.document(ctx, a.Doc)
		if err != nil {
			return err
		}
		f, err := s.db.file(ctx, d.FileID)
		if err != nil {
			return err
		}
		relPath, fileID, docDone = d.Path, d.FileID, d.ID
		meta.FileID, meta.DocumentID, meta.Key, meta.Source, meta.ETag, meta.Format, meta.Meta = f.ID, d.ID, d.Key, d.Source, f.ETag, f.Format, d.Meta
		if d.Key != "" {
			original = []byte(d.Body)
		}
	}
	dir := s.failedDir(meta.Source, relPath, meta.Key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if original != nil {
		if err := writeFileAtomic(filepath.Join(dir, "message.txt"), original); err != nil {
			return err
		}
	} else {
		src := filepath.Join(s.cfg.DataDir, IncomingDir, filepath.FromSlash(relPath))
		if _, err := moveIfSame(src, filepath.Join(dir, path.Base(relPath)), meta.ETag); err != nil {
			return err
		}
	}
	ef := ErrorFile{JobID: dl.JobID, Path: IncomingDir + "/" + relPath + meta.Key, Attempts: dl.Attempts, LastError: dl.LastError, FailedAt: dl.FailedAt}
	for name, v := range map[string]any{"error.json": ef, "metadata.json": meta} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(dir, name), append(b, '\n')); err != nil {
			return err
		}
	}
	now := micros(s.cfg.Clock.Now())
	err := s.db.RunTx(ctx, func(tx appdb.Tx) error {
		if docDone != "" {
			if _, err := tx.Exec(ctx, `UPDATE weir_documents SET status = $2, updated_at = $3 WHERE id = $1 AND status = $4`, docDone, docFailed, now, docParsed); err != nil {
				return err
			}
		}
		if original == nil {
			// The whole file failed: record it, parsed or not.
			if _, err := tx.Exec(ctx, `INSERT INTO weir_files (id, path, source, etag, format, status, documents, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $7) ON CONFLICT (id) DO UPDATE SET status = $6, updated_at = $7`,
				fileID, relPath, meta.Source, meta.ETag, meta.Format, fileFailed, now); err != nil {
				return err
			}
		}
		n, err := tx.Exec(ctx, `INSERT INTO weir_failures (dead_letter_id, dir, written_at) VALUES ($1, $2, $3) ON CONFLICT (dead_letter_id) DO NOTHING`,
			dl.ID, dir, now)
		if err != nil || n == 0 {
			return err // written by another process, which told of it
		}
		doc := docDone
		if doc == "" {
			doc = fileID
		}
		return s.event(ctx, tx, Event{Type: EventFailed, Document: doc, File: fileID, Source: meta.Source, Path: relPath, Key: meta.Key,
			Reason: string(dl.Reason), Error: dl.LastError, At: s.cfg.Clock.Now()})
	})
	if err != nil {
		return err
	}
	if original != nil {
		s.settleFile(ctx, fileID)
	}
	s.log.Warn("document failed; written to failed/", "dir", dir, "kind", dl.Kind, "reason", string(dl.Reason), "err", dl.LastError)
	return nil
}

// sweepOrphans settles the files still parsed whose documents have all
// ended: their move failed, or the process died before it.
func (s *Service) sweepOrphans(ctx context.Context) error {
	rows, err := s.db.SQL.QueryContext(ctx, `SELECT f.id FROM weir_files f WHERE f.status = $1
		AND NOT EXISTS (SELECT 1 FROM weir_documents d WHERE d.file_id = f.id AND d.status = $2) LIMIT 100`, fileParsed, docParsed)
	if err != nil {
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, s.trySettle(ctx, id))
	}
	return errors.Join(errs...)
}

// writeFileAtomic writes b to name through a temporary file of its own
// (two processes may write the same failure at once).
func writeFileAtomic(name string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*.tmp")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), name)
}
