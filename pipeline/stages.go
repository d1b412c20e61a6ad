package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/extract"
	"github.com/weirhq/weir/internal/appdb"
	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/parse"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/search"
)

// The job kinds of the stages.
const (
	KindParse   = "pipeline.parse"
	KindExtract = "pipeline.extract"
	KindSave    = "pipeline.save"
	KindIndex   = "pipeline.index"
	KindReindex = "pipeline.reindex"
)

// container is the name files of incoming/ are hashed under.
const container = "incoming"

type parseArgs struct {
	File   string `json:"file"`   // the file's job id
	Path   string `json:"path"`   // relative to incoming/, with slashes
	ETag   string `json:"etag"`   // SHA-256 of the content, hex
	Source string `json:"source"` // the first folder of Path, or "default"
}

func (parseArgs) Kind() string { return KindParse }

type extractArgs struct {
	Doc string `json:"doc"`
}

func (extractArgs) Kind() string { return KindExtract }

type saveArgs struct {
	Doc    string         `json:"doc"`
	Result extract.Result `json:"result"`
}

func (saveArgs) Kind() string { return KindSave }

type indexArgs struct {
	Doc string `json:"doc"`
}

func (indexArgs) Kind() string { return KindIndex }

// FileID is a file's job id: SHA-256 of its container, path and ETag, in
// hex.
func FileID(relPath, etag string) string {
	sum := sha256.Sum256([]byte(container + "\x00" + relPath + "\x00" + etag))
	return hex.EncodeToString(sum[:])
}

// ETag is the ETag of content: its SHA-256, in hex.
func ETag(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// docID is the id of the document at key in file fileID: the file's id for
// a file of one document.
func docID(fileID, key string) string {
	if key == "" {
		return fileID
	}
	sum := sha256.Sum256([]byte(fileID + key))
	return hex.EncodeToString(sum[:])
}

// sourceOf is the source of a path under incoming/: its first folder, or
// "default" for a file at the top.
func sourceOf(relPath string) string {
	if dir, _, ok := cutFirst(relPath); ok {
		return dir
	}
	return "default"
}

func cutFirst(p string) (string, string, bool) {
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			return p[:i], p[i+1:], true
		}
	}
	return "", p, false
}

// failedDir is the folder of a failure in failed/: {source}/{filename},
// the file's folders under its source kept (two files of one name in
// different folders fail apart), and #n after it for an archive's
// message.
func (s *Service) failedDir(source, relPath, key string) string {
	_, rest, ok := cutFirst(relPath)
	if !ok || source != sourceOf(relPath) {
		rest = relPath // a file at the top of incoming/: source "default"
	}
	return filepath.Join(s.cfg.DataDir, FailedDir, source, filepath.FromSlash(rest)+key)
}

// moveIfSame moves the file at src to dst if its content still has etag:
// a file changed in incoming/ since it was enqueued is a new version,
// which the scan enqueues, and stays. It reports whether it moved it; a
// missing src is not an error.
func moveIfSame(src, dst, etag string) (bool, error) {
	data, err := os.ReadFile(src)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if ETag(data) != etag {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, err
	}
	if err := os.Rename(src, dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// readFile reads the file of a parse job: in incoming/, or in failed/ where
// an earlier failure put it (a requeued job).
func (s *Service) readFile(a parseArgs) ([]byte, string, error) {
	for _, p := range []string{
		filepath.Join(s.cfg.DataDir, IncomingDir, filepath.FromSlash(a.Path)),
		filepath.Join(s.failedDir(a.Source, a.Path, ""), path.Base(a.Path)),
	} {
		b, err := os.ReadFile(p)
		if err == nil {
			return b, p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, "", err
		}
	}
	return nil, "", fs.ErrNotExist
}

// parse splits a file into documents and, in one transaction, records the
// file, its documents and their extract jobs.
func (s *Service) parse(ctx context.Context, j *weir.Job[parseArgs]) error {
	a := j.Args
	data, _, err := s.readFile(a)
	if errors.Is(err, fs.ErrNotExist) {
		if f, ferr := s.db.file(ctx, a.File); ferr == nil && f.Status != fileFailed {
			return nil // parsed and moved by an earlier attempt
		}
		return retry.Permanent(fmt.Errorf("%s: the file is gone from %s/ before it was parsed", a.Path, IncomingDir))
	}
	if err != nil {
		return err
	}
	if got := ETag(data); got != a.ETag {
		// Changed since it was seen: the scan makes a job of the new
		// content; this version no longer exists.
		s.log.Warn("file changed after it was enqueued; its new content has a job of its own", "path", a.Path, "job_id", j.ID)
		return nil
	}
	docs, err := parse.File(path.Base(a.Path), data)
	if err != nil {
		return retry.Permanent(fmt.Errorf("parse %s: %w", a.Path, err))
	}
	format := "text"
	if len(docs) > 0 {
		format = docs[0].Meta["format"]
	}
	now := micros(s.cfg.Clock.Now())
	err = s.db.RunTx(ctx, func(tx appdb.Tx) error {
		// A file that failed before (its parse requeued) is parsed now.
		if _, err := tx.Exec(ctx, `INSERT INTO weir_files (id, path, source, etag, format, status, documents, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
			ON CONFLICT (id) DO UPDATE SET status = excluded.status, documents = excluded.documents, format = excluded.format,
				updated_at = excluded.updated_at WHERE weir_files.status = 'failed'`,
			a.File, a.Path, a.Source, a.ETag, format, fileParsed, len(docs), now); err != nil {
			return err
		}
		for _, d := range docs {
			id := docID(a.File, d.Key)
			meta, err := json.Marshal(d.Meta)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO weir_documents (id, file_id, key, source, path, status, title, body, meta, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) ON CONFLICT (id) DO NOTHING`,
				id, a.File, d.Key, a.Source, a.Path, docParsed, d.Title, d.Text, string(meta), now); err != nil {
				return err
			}
			if _, err := s.client.InsertTx(ctx, tx.Ex, extractArgs{Doc: id}, &weir.InsertOpts{IdempotencyKey: "extract:" + id, Source: a.Path + d.Key}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		s.settleFile(ctx, a.File)
	}
	return nil
}

// extract extracts a document and hands the result to the save stage.
// While the extractor's breaker is open the job waits, without spending
// an attempt.
func (s *Service) extract(ctx context.Context, j *weir.Job[extractArgs]) error {
	d, err := s.db.document(ctx, j.Args.Doc)
	if err != nil {
		return err
	}
	if d.Status == docSaved {
		return nil
	}
	res, err := s.cfg.Extractor.Extract(ctx, extract.Input{ID: d.ID, Source: d.Path + d.Key, Title: d.Title, Text: d.Body, Meta: d.Meta})
	if err != nil {
		var open *breaker.OpenError
		if errors.As(err, &open) {
			s.log.Warn("the extractor's breaker is open; the document waits", "doc", d.ID, "retry_in", open.RetryIn)
			return weir.JobSnooze(max(open.RetryIn, s.cfg.PollEvery))
		}
		return fmt.Errorf("extract %s%s: %w", d.Path, d.Key, err)
	}
	_, err = s.client.Insert(ctx, saveArgs{Doc: d.ID, Result: res}, &weir.InsertOpts{IdempotencyKey: "save:" + d.ID, Source: d.Path + d.Key})
	return err
}

// save writes the extraction to SQL, the source of truth, with the index
// job in the same transaction; then moves the file to processed/ once all
// its documents are saved or failed.
func (s *Service) save(ctx context.Context, j *weir.Job[saveArgs]) error {
	r := j.Args.Result
	terms, err := json.Marshal(r.KeyTerms)
	if err != nil {
		return retry.Permanent(err)
	}
	var (
		fileID                              string
		requeued                            bool // saved after its failure was requeued
		failedSource, failedPath, failedKey string
	)
	err = s.db.RunTx(ctx, func(tx appdb.Tx) error {
		var status, source, relPath, key string
		if err := tx.QueryRow(ctx, `SELECT file_id, status, source, path, key FROM weir_documents WHERE id = $1`, j.Args.Doc).
			Scan(&fileID, &status, &source, &relPath, &key); err != nil {
			return fmt.Errorf("document %s: %w", j.Args.Doc, err)
		}
		if status == docSaved {
			return nil
		}
		requeued = status == docFailed
		failedSource, failedPath, failedKey = source, relPath, key
		now := s.cfg.Clock.Now()
		if _, err := tx.Exec(ctx, `UPDATE weir_documents SET status = $2, title = $3, language = $4, word_count = $5, key_terms = $6,
			summary = $7, extractor = $8, updated_at = $9 WHERE id = $1`,
			j.Args.Doc, docSaved, r.Title, r.Language, r.WordCount, string(terms), r.Summary, r.Extractor, micros(now)); err != nil {
			return err
		}
		if _, err := s.client.InsertTx(ctx, tx.Ex, indexArgs{Doc: j.Args.Doc}, &weir.InsertOpts{IdempotencyKey: "index:" + j.Args.Doc}); err != nil {
			return err
		}
		return s.event(ctx, tx, Event{Type: EventSaved, Document: j.Args.Doc, File: fileID, Source: source, Path: relPath, Key: key,
			Title: r.Title, Language: r.Language, At: now})
	})
	if err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.PipelineAfterSave)
	if requeued && failedKey != "" {
		// An archive's message, failed, requeued and now saved: its
		// failure's folder goes (a whole file's goes when it settles).
		if err := os.RemoveAll(s.failedDir(failedSource, failedPath, failedKey)); err != nil {
			s.log.Warn("remove the folder of a failure that was requeued and saved", "doc", j.Args.Doc, "err", err)
		}
	}
	s.settleFile(ctx, fileID)
	return nil
}

// index writes a saved document to the index. Its last failed attempt is
// recorded on the document and left to reconciliation.
func (s *Service) index(ctx context.Context, j *weir.Job[indexArgs]) error {
	d, err := s.db.document(ctx, j.Args.Doc)
	if err != nil {
		return err
	}
	if d.Status != docSaved {
		return nil
	}
	if err := s.cfg.Index.Put(ctx, searchDoc(d)); err != nil {
		if j.Attempt < j.MaxAttempts {
			return err
		}
		s.log.Warn("index failed; the document waits for reconciliation", "doc", d.ID, "attempt", j.Attempt, "err", err)
		_, uerr := s.db.SQL.ExecContext(ctx, `UPDATE weir_documents SET index_error = $2 WHERE id = $1`, d.ID, err.Error())
		return uerr
	}
	_, err = s.db.SQL.ExecContext(ctx, `UPDATE weir_documents SET index_error = '', indexed_at = $2 WHERE id = $1`, d.ID, micros(s.cfg.Clock.Now()))
	return err
}

// searchDoc is what the index keeps of d.
func searchDoc(d Document) search.Doc {
	return search.Doc{ID: d.ID, Title: d.Title, Body: d.Body, Summary: d.Summary, Source: d.Path + d.Key,
		Language: d.Language, Terms: d.KeyTerms, UpdatedAt: d.UpdatedAt}
}

// settleFile moves the file fileID from incoming/ (or failed/, after a
// requeue) to processed/ once none of its documents waits, and marks it
// processed. A failed move is logged: the sweep tries again.
func (s *Service) settleFile(ctx context.Context, fileID string) {
	if err := s.trySettle(ctx, fileID); err != nil && ctx.Err() == nil {
		s.log.Warn("move a processed file; the sweep will try again", "file", fileID, "err", err)
	}
}

func (s *Service) trySettle(ctx context.Context, fileID string) error {
	f, err := s.db.file(ctx, fileID)
	if err != nil || f.Status == fileProcessed {
		return err
	}
	waiting, err := s.db.count(ctx, `SELECT count(*) FROM weir_documents WHERE file_id = $1 AND status = $2`, fileID, docParsed)
	if err != nil || waiting > 0 {
		return err
	}
	saved, err := s.db.count(ctx, `SELECT count(*) FROM weir_documents WHERE file_id = $1 AND status = $2`, fileID, docSaved)
	if err != nil {
		return err
	}
	if saved == 0 && f.Documents > 0 {
		// Every document failed: the file goes to failed/, beside its
		// documents' failures.
		dir := s.failedDir(f.Source, f.Path, "")
		src := filepath.Join(s.cfg.DataDir, IncomingDir, filepath.FromSlash(f.Path))
		if _, err := moveIfSame(src, filepath.Join(dir, path.Base(f.Path)), f.ETag); err != nil {
			return err
		}
		_, err = s.db.SQL.ExecContext(ctx, `UPDATE weir_files SET status = $2, updated_at = $3 WHERE id = $1`, fileID, fileFailed, micros(s.cfg.Clock.Now()))
		return err
	}
	dst := filepath.Join(s.cfg.DataDir, ProcessedDir, filepath.FromSlash(f.Path))
	src := filepath.Join(s.cfg.DataDir, IncomingDir, filepath.FromSlash(f.Path))
	moved, err := moveIfSame(src, dst, f.ETag)
	if err != nil {
		return err
	}
	if !moved && f.Status == fileFailed {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		// Requeued from failed/: the original comes back from there.
		dir := s.failedDir(f.Source, f.Path, "")
		if err := os.Rename(filepath.Join(dir, path.Base(f.Path)), dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	_, err = s.db.SQL.ExecContext(ctx, `UPDATE weir_files SET status = $2, updated_at = $3 WHERE id = $1`, fileID, fileProcessed, micros(s.cfg.Clock.Now()))
	return err
}
