package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/appdb"
	"github.com/weirhq/weir/weirtype"
)

// ErrorFile is error.json of a failure in failed/: the five fields of the
// design's dead-letter record, named and formatted as it names them, then
// weir's own.
type ErrorFile struct {
	// JobID is the failed file's job id: SHA-256 of its container, path
	// and ETag, in hex (FileID), the idempotency key of its parse job.
	JobID string `json:"jobId"`
	// BlobPath is the file's path: incoming/{path}.
	BlobPath string `json:"blobPath"`
	// Attempts is how many attempts the failed stage made.
	Attempts int `json:"attempts"`
	// LastError is the last attempt's error.
	LastError string `json:"lastError"`
	// FailedAt is when the job was dead-lettered: RFC 3339 in UTC, to the
	// second ("2026-01-21T15:30:00Z").
	FailedAt string `json:"failedAt"`

	// Part is the failed message of an archive ("#2"); empty for a whole
	// file.
	Part string `json:"part,omitempty"`
	// DocumentID is the failed document's id (DocumentID); empty when
	// the file failed before it had documents.
	DocumentID string `json:"documentId,omitempty"`
	// EngineJobID is the engine's id of the job that failed, as weir jobs
	// and weir dlq show it.
	EngineJobID int64 `json:"engineJobId"`
}

// FailedAtFormat is the format of ErrorFile.FailedAt, a time in UTC.
const FailedAtFormat = time.RFC3339

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
// yet in ingest_failures to failed/.
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
				done, err := s.db.count(ctx, `SELECT count(*) FROM ingest_failures WHERE dead_letter_id = $1`, dl.ID)
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

// failurePayload is what writeFailure reads of a stage's arguments.
type failurePayload struct {
	parseArgs
	Version  int64  `json:"version"`
	Doc      string `json:"doc"`
	Key      string `json:"key"`
	Original []byte `json:"original"`
}

// writeFailure writes the dead letter dl to failed/{source}/{filename}/:
// the original (the file, moved there, or an archive's message), error.json
// and metadata.json, none more readable than the original; then records
// it written, marks the document failed and asks the index to drop it.
// A dead letter of a version that a newer one has replaced since is
// written too, but changes no document.
func (s *Service) writeFailure(ctx context.Context, dl *weirtype.DeadLetter) error {
	meta := MetadataFile{Stage: dl.Kind, DeadLetterID: dl.ID, Reason: dl.Reason, ErrorType: dl.ErrorType, Errors: dl.Errors, Payload: dl.Payload}
	var a failurePayload
	if err := json.Unmarshal(dl.Payload, &a); err != nil {
		return err
	}
	var (
		relPath  = a.Path
		fsPath   = a.fsPath()
		original []byte // an archive's message, for message.txt
		fileID   = a.File
		docDone  string // the document to mark failed
		stale    bool   // of a version replaced since
	)
	meta.FileID, meta.Source, meta.ETag, meta.Key = a.File, a.Source, a.ETag, a.Key
	if dl.Kind != KindParse {
		d, err := s.db.document(ctx, a.Doc)
		switch {
		case errors.Is(err, ErrNotFound):
			stale = true
		case err != nil:
			return err
		case replacedBy(d, a.File, a.Version):
			stale = true
		default:
			fileID, relPath, docDone = d.FileID, d.Path, d.ID
			meta.Key, meta.Meta = d.Key, d.Meta
			if d.Key != "" {
				original = []byte(d.Body)
			}
		}
		if relPath == "" {
			// A job enqueued before its arguments named the file, whose
			// document is gone: there is nothing to write.
			s.log.Warn("dead letter of a document that is gone; nothing to write to failed/", "dead_letter", dl.ID, "doc", a.Doc)
			_, err := s.db.SQL.ExecContext(ctx, `INSERT INTO ingest_failures (dead_letter_id, dir, written_at) VALUES ($1, '', $2)
				ON CONFLICT (dead_letter_id) DO NOTHING`, dl.ID, micros(s.cfg.Clock.Now()))
			return err
		}
		fsPath = relPath
		meta.DocumentID, meta.Source = a.Doc, sourceOf(relPath)
		if f, err := s.db.file(ctx, fileID); err == nil {
			meta.FileID, meta.ETag, meta.Format = f.ID, f.ETag, f.Format
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		if a.Original != nil {
			original = a.Original // a poison message as parsed; SQL holds it cleaned
		}
		if meta.Payload, err = withoutOriginal(dl.Payload); err != nil {
			return err
		}
	}
	dir := failedDir(meta.Source, relPath, meta.Key)
	incoming := path.Join(IncomingDir, fsPath)
	kept := path.Join(dir, path.Base(relPath))
	// A whole file's failure moves the file; a message's keeps the
	// message (a replaced version's only if its job carried it).
	wholeFile := meta.Key == ""
	// The failure's files take the original's mode, wherever it is.
	mode := fs.FileMode(0o600)
	if s.blobs == nil {
		mode = s.sourceMode(incoming, kept, path.Join(ProcessedDir, relPath))
		if err := s.root.MkdirAll(dir, dirMode(mode)); err != nil {
			return err
		}
		if err := s.root.Chmod(dir, dirMode(mode)); err != nil {
			return err
		}
	}
	if wholeFile && !stale {
		if _, err := s.moveIfSame(ctx, incoming, kept, meta.ETag); err != nil && !errors.Is(err, ErrNotRegular) {
			return err
		}
	}
	if !wholeFile && original != nil {
		if err := s.writeFile(ctx, path.Join(dir, "message.txt"), original, fileMode(mode)); err != nil {
			return err
		}
	}
	ef := ErrorFile{JobID: meta.FileID, BlobPath: IncomingDir + "/" + relPath, Attempts: dl.Attempts, LastError: dl.LastError,
		FailedAt: dl.FailedAt.UTC().Truncate(time.Second).Format(FailedAtFormat), Part: meta.Key, DocumentID: meta.DocumentID, EngineJobID: dl.JobID}
	for name, v := range map[string]any{"error.json": ef, "metadata.json": meta} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := s.writeFile(ctx, path.Join(dir, name), append(b, '\n'), fileMode(mode)); err != nil {
			return err
		}
	}
	now := micros(s.cfg.Clock.Now())
	err := s.db.RunTx(ctx, func(tx appdb.Tx) error {
		if docDone != "" {
			n, err := tx.Exec(ctx, `UPDATE ingest_documents SET status = $2, updated_at = $3 WHERE id = $1 AND status = $4 AND file_id = $5`,
				docDone, docFailed, now, docParsed, fileID)
			if err != nil {
				return err
			}
			if n > 0 {
				// An earlier version of it may be in the index.
				if _, err := s.client.InsertTx(ctx, tx.Ex, indexArgs{Doc: docDone, File: fileID},
					&weir.InsertOpts{IdempotencyKey: "index:" + docDone + ":failed:" + strconv.FormatInt(dl.ID, 10)}); err != nil {
					return err
				}
			}
		}
		if wholeFile && !stale {
			// The whole file failed: record it, parsed or not.
			if _, err := tx.Exec(ctx, `INSERT INTO ingest_files (id, path, source, etag, format, status, documents, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $7) ON CONFLICT (id) DO UPDATE SET status = $6, updated_at = $7
				WHERE ingest_files.status <> $8`,
				fileID, relPath, meta.Source, meta.ETag, meta.Format, fileFailed, now, fileSuperseded); err != nil {
				return err
			}
		}
		n, err := tx.Exec(ctx, `INSERT INTO ingest_failures (dead_letter_id, dir, written_at) VALUES ($1, $2, $3) ON CONFLICT (dead_letter_id) DO NOTHING`,
			dl.ID, s.where(dir), now)
		if err != nil || n == 0 {
			return err // written by another process, which told of it
		}
		doc := docDone
		if doc == "" {
			doc = cmp.Or(meta.DocumentID, fileID)
		}
		return s.event(ctx, tx, Event{Type: EventFailed, Document: doc, File: fileID, Source: meta.Source, Path: relPath, Key: meta.Key,
			Reason: string(dl.Reason), Error: dl.LastError, At: s.cfg.Clock.Now()})
	})
	if err != nil {
		return err
	}
	if !wholeFile && !stale {
		s.settleFile(ctx, fileID)
	}
	s.log.Warn("document failed; written to failed/", "dir", s.where(dir), "kind", dl.Kind,
		"reason", string(dl.Reason), "err", dl.LastError, "replaced", stale)
	return nil
}

// withoutOriginal is a stage's payload without the original text of a
// poison message, which failed/ keeps as message.txt.
func withoutOriginal(payload []byte) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		return nil, err
	}
	if _, ok := m["original"]; !ok {
		return payload, nil
	}
	delete(m, "original")
	return json.Marshal(m)
}

// sweepOrphans settles the files still parsed whose documents have all
// ended: their move failed, or the process died before it.
func (s *Service) sweepOrphans(ctx context.Context) error {
	ids, err := s.db.Strings(ctx, `SELECT f.id FROM ingest_files f WHERE f.status = $1
		AND NOT EXISTS (SELECT 1 FROM ingest_documents d WHERE d.file_id = f.id AND d.status = $2) LIMIT 100`, fileParsed, docParsed)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, s.trySettle(ctx, id))
	}
	return errors.Join(errs...)
}
