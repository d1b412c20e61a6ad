package pipeline

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"path"
	"runtime/debug"
	"strconv"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/parse"
	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store/appdb"
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
	Path   string `json:"path"`   // relative to incoming/, with slashes; bytes that are not UTF-8 shown as U+FFFD
	ETag   string `json:"etag"`   // SHA-256 of the content, hex
	Source string `json:"source"` // the first folder of Path, or "default"
	// RawPath is the path's bytes when they are not valid UTF-8 (which
	// JSON and SQL text cannot hold): the file's name on disk.
	RawPath []byte `json:"raw_path,omitempty"`
	// Poison, when set, is why the file is refused at once, unread (its
	// name is not UTF-8, it is larger than MaxFileSize).
	Poison string `json:"poison,omitempty"`
}

func (parseArgs) Kind() string { return KindParse }

// fsPath is the file's path under incoming/ on disk.
func (a parseArgs) fsPath() string {
	if a.RawPath != nil {
		return string(a.RawPath)
	}
	return a.Path
}

// The arguments of the jobs that follow a parse name the document and the
// version of it they work on: File, the file id whose parse made them, and
// Version, the change time that parse read (the same content may come
// back after a newer one, and be parsed again). A job of a version that a
// newer one has replaced since does nothing. Jobs enqueued before File
// existed have none, and take the document as it is.

// versionKey names a version in the idempotency keys of its jobs.
func versionKey(doc, file string, version int64) string {
	return doc + ":" + file + "@" + strconv.FormatInt(version, 10)
}

// replacedBy reports whether the document d no longer holds the version
// file, version (zero values: any).
func replacedBy(d Document, file string, version int64) bool {
	return (file != "" && d.FileID != file) || (version != 0 && d.version != version)
}

type extractArgs struct {
	Doc     string `json:"doc"`
	File    string `json:"file,omitempty"`
	Version int64  `json:"version,omitempty"`
	Path    string `json:"path,omitempty"`
	Key     string `json:"key,omitempty"`
	// Poison, when set, is why the document is refused at once: a text
	// of it SQL cannot hold. Original is then an archive's message as it
	// was parsed, for failed/ (SQL holds it cleaned).
	Poison   string `json:"poison,omitempty"`
	Original []byte `json:"original,omitempty"`
}

func (extractArgs) Kind() string { return KindExtract }

type saveArgs struct {
	Doc     string         `json:"doc"`
	File    string         `json:"file,omitempty"`
	Version int64          `json:"version,omitempty"`
	Path    string         `json:"path,omitempty"`
	Key     string         `json:"key,omitempty"`
	Result  extract.Result `json:"result"`
}

func (saveArgs) Kind() string { return KindSave }

// indexArgs asks for the index to be brought to SQL's state of the
// document: written if it is saved, deleted if it is gone or failed.
type indexArgs struct {
	Doc  string `json:"doc"`
	File string `json:"file,omitempty"`
}

func (indexArgs) Kind() string { return KindIndex }

// FileID is a file's job id: SHA-256 of its container, path and ETag, in
// hex. It names one version of the file, and is the idempotency key of
// its parse job.
func FileID(relPath, etag string) string {
	sum := sha256.Sum256([]byte(container + "\x00" + relPath + "\x00" + etag))
	return hex.EncodeToString(sum[:])
}

// ETag is the ETag of content: its SHA-256, in hex.
func ETag(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// DocumentID is the id of the document at key ("" for a file of one
// document, "#n" for an archive's nth message) of the file at relPath
// under incoming/: SHA-256 of "document", the container, the path and the
// key, in hex. Every version of the file gives its document this id: a
// newer version's document replaces the older one.
func DocumentID(relPath, key string) string {
	sum := sha256.Sum256([]byte("document\x00" + container + "\x00" + relPath + "\x00" + key))
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

// failedDir is the folder of a failure in failed/, relative to the data
// directory: {source}/{filename}, the file's folders under its source
// kept (two files of one name in different folders fail apart), and #n
// after it for an archive's message.
func failedDir(source, relPath, key string) string {
	_, rest, ok := cutFirst(relPath)
	if !ok || source != sourceOf(relPath) {
		rest = relPath // a file at the top of incoming/: source "default"
	}
	return path.Join(FailedDir, source, rest+key)
}

// openVersion opens the file of a parse job, in incoming/ or in failed/
// where an earlier failure put it (a requeued job), through no symbolic
// link (or its blob: see openBlobVersion).
func (s *Service) openVersion(ctx context.Context, a parseArgs) (opened, error) {
	if s.blobs != nil {
		return s.openBlobVersion(ctx, a)
	}
	for _, p := range []string{
		path.Join(IncomingDir, a.fsPath()),
		path.Join(failedDir(a.Source, a.Path, ""), path.Base(a.Path)),
	} {
		f, fi, err := s.openRegular(p, nil)
		if err == nil {
			return opened{r: f, size: fi.Size(), version: changeTime(fi), same: func(_ context.Context, sum string) error {
				if sum != a.ETag {
					return errChanged
				}
				return nil
			}}, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return opened{}, err
		}
	}
	return opened{}, fs.ErrNotExist
}

// errChanged: the file's content is no longer the version its parse job
// was enqueued for.
var errChanged = errors.New("the file changed after it was enqueued")

// parse reads a file, splits it into documents and records them (see
// record). An archive is parsed a message at a time as it is read from
// the file, never whole in memory; any other file is read whole, once,
// and dropped once parsed. The parse runs before the transaction that
// records its documents, which holds the store's writer only for the
// writes. A file larger than MaxFileSize is refused unread; one whose
// content is no longer its job's (changed since the scan) is left to the
// job of its new content.
func (s *Service) parse(ctx context.Context, j *weir.Job[parseArgs]) error {
	a := j.Args
	if a.Poison != "" {
		return retry.Permanent(fmt.Errorf("%s: %s", a.Path, a.Poison))
	}
	f, err := s.openVersion(ctx, a)
	if err, down := s.blobUnavailable(err); down {
		return err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if f, ferr := s.db.file(ctx, a.File); ferr == nil && f.Status != fileFailed {
			return nil // parsed and moved by an earlier attempt
		}
		return retry.Permanent(fmt.Errorf("%s: the file is gone from %s/ before it was parsed", a.Path, IncomingDir))
	case errors.Is(err, ErrNotRegular):
		return retry.Permanent(fmt.Errorf("%s: %w", a.Path, err))
	case errors.Is(err, errChanged):
	case err != nil:
		return err
	default:
		defer f.r.Close()
		if f.size > s.cfg.MaxFileSize {
			return retry.Permanent(fmt.Errorf("%s: %w", a.Path, &TooLargeError{Size: f.size, Limit: s.cfg.MaxFileSize}))
		}
		var docs documents
		docs, err = s.documentsOf(ctx, f, a)
		var parsed []parse.Doc
		if err == nil {
			parsed, err = s.collect(ctx, a, docs)
		}
		if err == nil {
			err = s.record(ctx, j.ID, a, f.version, parsed)
		}
	}
	if err, down := s.blobUnavailable(err); down {
		return err
	}
	if errors.Is(err, errChanged) {
		// The scan makes a job of the new content; this version no longer
		// exists.
		s.log.Warn("file changed after it was enqueued; its new content has a job of its own", "path", a.Path, "job_id", j.ID)
		return nil
	}
	return err
}

// documentsOf is the documents of the file f of the parse job a: an
// archive streamed from f, or any other file read whole (errChanged if it
// no longer has the job's content).
func (s *Service) documentsOf(ctx context.Context, f opened, a parseArgs) (documents, error) {
	name := path.Base(a.Path)
	if s.parseFile == nil && parse.Format(name) == parse.FormatMbox {
		return s.streamArchive(ctx, f.r, f.same, s.cfg.MaxFileSize), nil
	}
	data, err := readLimited(f.r, f.size, s.cfg.MaxFileSize)
	var tooLarge *TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return documents{}, errChanged // it has grown since the scan
	case err != nil:
		return documents{}, err
	}
	if err := f.same(ctx, ETag(data)); err != nil {
		return documents{}, err
	}
	return s.parseWhole(name, data), nil
}

// documents is a file's documents as its parser yields them, then, once
// they are all read, check: nil when the content read was the version
// parsed (errChanged when it was not).
type documents struct {
	each  iter.Seq2[parse.Doc, error]
	check func() error
}

// parseWhole parses data, the whole content of the file called name.
func (s *Service) parseWhole(name string, data []byte) documents {
	parser := s.parseFile
	if parser == nil {
		parser = parse.File
	}
	return documents{each: func(yield func(parse.Doc, error) bool) {
		docs, err := parser(name, data)
		data = nil // the documents hold the text now
		if err != nil {
			yield(parse.Doc{}, err)
			return
		}
		for _, d := range docs {
			if !yield(d, nil) {
				return
			}
		}
	}}
}

// streamArchive parses the archive f a message at a time as it reads it,
// hashing what it reads: check then says, through same, whether the
// content was the version parsed (it is errChanged when not, or when f
// has grown past limit since the scan).
func (s *Service) streamArchive(ctx context.Context, f io.Reader, same func(context.Context, string) error, limit int64) documents {
	h := sha256.New()
	in := &readCounter{r: io.LimitReader(f, limit+1)}
	r := io.TeeReader(in, h)
	return documents{
		each: func(yield func(parse.Doc, error) bool) {
			for d, err := range parse.Mbox(r) {
				if err != nil && in.err != nil {
					err = &readError{in.err} // the file, not its content
				}
				if !yield(d, err) {
					return
				}
			}
		},
		check: func() error {
			if _, err := io.Copy(io.Discard, r); err != nil {
				return err
			}
			if in.n > limit {
				return errChanged // grown since the scan
			}
			return same(ctx, hex.EncodeToString(h.Sum(nil)))
		},
	}
}

// readCounter counts what it reads and keeps its first error.
type readCounter struct {
	r   io.Reader
	n   int64
	err error
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// readError is a failure to read a file, which a retry may not meet
// again.
type readError struct{ err error }

func (e *readError) Error() string { return "read: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// docResult is a document, or the parser's error, as streamDocs hands
// them over.
type docResult struct {
	doc parse.Doc
	err error
}

// streamDocs runs the parser apart, handing its documents over one at a
// time: the parser does not watch ctx, so that when ctx ends first it is
// left to finish alone (an archive read from its file stops at the file's
// closing). next returns the next document, false at the end, or an
// error: the parser's (permanent: the same content would fail again),
// its panic, a read error, or the end of ctx: a parse that runs out of
// time fails for good too. stop must be called once the documents are no
// longer wanted; wait waits, up to ctx, for the parser to end once it has
// handed over an error.
func (s *Service) streamDocs(ctx context.Context, a parseArgs, docs documents) (next func() (parse.Doc, bool, error), stop func(), wait func(context.Context) error) {
	ch := make(chan docResult)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		defer func() {
			if r := recover(); r != nil {
				select {
				case ch <- docResult{err: fmt.Errorf("the parser panicked: %v\n%s", r, debug.Stack())}:
				case <-quit:
				}
			}
		}()
		for d, err := range docs.each {
			select {
			case ch <- docResult{d, err}:
			case <-quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	next = func() (parse.Doc, bool, error) {
		select {
		case r, ok := <-ch:
			switch {
			case !ok:
				return parse.Doc{}, false, nil
			case r.err == nil:
				return r.doc, true, nil
			case errors.As(r.err, new(*readError)):
				return parse.Doc{}, false, fmt.Errorf("parse %s: %w", a.Path, r.err)
			}
			return parse.Doc{}, false, retry.Permanent(fmt.Errorf("parse %s: %w", a.Path, r.err))
		case <-ctx.Done():
			if timeout := (*weir.TimeoutError)(nil); errors.As(context.Cause(ctx), &timeout) {
				return parse.Doc{}, false, retry.Permanent(fmt.Errorf("parse %s: not done within the parse stage's time limit of %v: the file is too large or too intricate to parse (%w)",
					a.Path, timeout.Timeout, timeout))
			}
			return parse.Doc{}, false, context.Cause(ctx)
		}
	}
	wait = func(ctx context.Context) error {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return next, func() { close(quit) }, wait
}

// lockPath serialises, on PostgreSQL, the transactions that record
// versions of one path (SQLite runs one write transaction at a time).
func (s *Service) lockPath(ctx context.Context, tx appdb.Tx, relPath string) error {
	if s.cfg.DB.Driver != appdb.Postgres {
		return nil
	}
	sum := sha256.Sum256([]byte("weir.pipeline.path\x00" + relPath))
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(binary.BigEndian.Uint64(sum[:8])))
	return err
}

// collect reads the documents of docs, within the parse stage's time
// limit (see streamDocs), then checks what was read.
func (s *Service) collect(ctx context.Context, a parseArgs, docs documents) ([]parse.Doc, error) {
	next, stop, wait := s.streamDocs(ctx, a, docs)
	defer stop()
	var out []parse.Doc
	for {
		d, ok, err := next()
		if err != nil {
			if docs.check != nil && ctx.Err() == nil {
				// An archive refused: perhaps not the version parsed.
				if waitErr := wait(ctx); waitErr == nil && errors.Is(docs.check(), errChanged) {
					return nil, errChanged
				}
			}
			return nil, err
		}
		if !ok {
			break
		}
		out = append(out, d)
	}
	if docs.check != nil {
		if err := docs.check(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// record writes, in one transaction, the file's version and its
// documents with their extract jobs. A
// document's id is its path and key (DocumentID): a newer version of the
// file replaces the older one's documents in place, deletes those it
// lacks (their index jobs delete them from the index) and supersedes the
// older versions still in flight. A version older than one recorded
// already (a parse that finishes after a newer one's) changes nothing:
// its file is marked superseded. Versions are ordered by the file's
// change time, then by the parse job's id.
func (s *Service) record(ctx context.Context, job int64, a parseArgs, changed int64, docs []parse.Doc) error {
	format := cmp.Or(parse.Format(path.Base(a.Path)), parse.FormatText)
	now := micros(s.cfg.Clock.Now())
	superseded := false
	err := s.db.RunTx(ctx, func(tx appdb.Tx) error {
		if err := s.lockPath(ctx, tx, a.Path); err != nil {
			return err
		}
		// The version's row: new, or one that failed before (its parse
		// requeued), or an older reading of the same content (content
		// that came back after a newer version).
		if _, err := tx.Exec(ctx, `INSERT INTO ingest_files (id, path, source, etag, format, status, documents, version, job, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
			ON CONFLICT (id) DO UPDATE SET status = excluded.status, documents = excluded.documents, format = excluded.format,
				version = excluded.version, job = excluded.job, updated_at = excluded.updated_at
			WHERE ingest_files.status = 'failed' OR ingest_files.version < excluded.version
				OR (ingest_files.version = excluded.version AND ingest_files.job < excluded.job)`,
			a.File, a.Path, a.Source, a.ETag, format, fileParsed, len(docs), changed, job, now); err != nil {
			return err
		}
		var newer int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM ingest_files WHERE path = $1 AND id <> $2 AND documents > 0
			AND (version > $3 OR (version = $3 AND job > $4))`, a.Path, a.File, changed, job).Scan(&newer); err != nil {
			return err
		}
		if newer > 0 {
			superseded = true
			_, err := tx.Exec(ctx, `UPDATE ingest_files SET status = $2, updated_at = $3 WHERE id = $1`, a.File, fileSuperseded, now)
			return err
		}
		for _, d := range docs {
			if err := s.recordDoc(ctx, tx, job, a, changed, d, now); err != nil {
				return err
			}
		}
		// The documents of older versions this one lacks (an archive
		// that lost messages) go.
		gone, err := tx.Strings(ctx, `SELECT id FROM ingest_documents WHERE path = $1 AND (version < $2 OR (version = $2 AND job < $3))`, a.Path, changed, job)
		if err != nil {
			return err
		}
		for _, id := range gone {
			if _, err := tx.Exec(ctx, `DELETE FROM ingest_documents WHERE id = $1`, id); err != nil {
				return err
			}
			if _, err := s.client.InsertTx(ctx, tx.Ex, indexArgs{Doc: id, File: a.File}, &weir.InsertOpts{IdempotencyKey: "index:" + versionKey(id, a.File, changed)}); err != nil {
				return err
			}
		}
		// Older versions still in flight end here: their documents are
		// this one's now.
		_, err = tx.Exec(ctx, `UPDATE ingest_files SET status = $3, updated_at = $4 WHERE path = $1 AND id <> $2 AND status = $5`,
			a.Path, a.File, fileSuperseded, now, fileParsed)
		return err
	})
	if err != nil {
		return err
	}
	if superseded {
		s.log.Info("an older version of the file was parsed after a newer one; it changes nothing", "path", a.Path, "file", a.File)
		return nil
	}
	s.settleFile(ctx, a.File)
	return nil
}

// recordDoc writes the document d of the file version a, changed, and its
// extract job, in tx: a poison document (a text SQL cannot hold) is
// written cleaned, and its job refuses it at once.
func (s *Service) recordDoc(ctx context.Context, tx appdb.Tx, job int64, a parseArgs, changed int64, d parse.Doc, now int64) error {
	c, err := checkDoc(a.Path, d)
	if err != nil {
		return retry.Permanent(fmt.Errorf("%s%s: %w", a.Path, d.Key, err))
	}
	id := DocumentID(a.Path, d.Key)
	n, err := tx.Exec(ctx, `INSERT INTO ingest_documents (id, file_id, key, source, path, status, title, body, meta, version, job, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)
		ON CONFLICT (id) DO UPDATE SET file_id = excluded.file_id, source = excluded.source, status = excluded.status,
			title = excluded.title, body = excluded.body, meta = excluded.meta, language = '', word_count = 0, key_terms = '[]',
			summary = '', extractor = '', index_error = '', indexed_at = 0, version = excluded.version, job = excluded.job,
			updated_at = excluded.updated_at
		WHERE ingest_documents.version < excluded.version OR (ingest_documents.version = excluded.version AND ingest_documents.job < excluded.job)`,
		id, a.File, d.Key, a.Source, a.Path, docParsed, c.title, c.text, c.meta, changed, job, now)
	if err != nil || n == 0 {
		return err // n == 0: recorded by an earlier attempt of this parse
	}
	args := extractArgs{Doc: id, File: a.File, Version: changed, Path: a.Path, Key: d.Key, Poison: c.poison}
	if c.poison != "" && d.Key != "" {
		args.Original = []byte(d.Text)
	}
	_, err = s.client.InsertTx(ctx, tx.Ex, args, &weir.InsertOpts{IdempotencyKey: "extract:" + versionKey(id, a.File, changed), Source: a.Path + d.Key})
	return err
}

// runExtractor runs the extractor within the stage's time limit: an
// extractor that does not watch ctx runs apart and, when ctx ends first,
// is left to finish alone while the attempt fails (and is retried).
func (s *Service) runExtractor(ctx context.Context, in extract.Input) (extract.Result, error) {
	type result struct {
		res extract.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: retry.Permanent(fmt.Errorf("the extractor panicked: %v\n%s", r, debug.Stack()))}
			}
		}()
		res, err := s.cfg.Extractor.Extract(ctx, in)
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		return r.res, r.err
	case <-ctx.Done():
		return extract.Result{}, context.Cause(ctx)
	}
}

// extract extracts a document and hands the result to the save stage.
// While the extractor's breaker is open the job waits, without spending
// an attempt: the engine pauses the stage when the extractor names its
// breaker (extractBreaker); otherwise the job snoozes until the probe.
func (s *Service) extract(ctx context.Context, j *weir.Job[extractArgs]) error {
	a := j.Args
	d, err := s.db.document(ctx, a.Doc)
	if errors.Is(err, ErrNotFound) {
		s.log.Debug("document gone: a newer version of its file lacks it", "doc", a.Doc)
		return nil
	}
	if err != nil {
		return err
	}
	if replacedBy(d, a.File, a.Version) {
		return nil // a newer version of the file took the document's place
	}
	if a.Poison != "" {
		return retry.Permanent(errors.New(a.Poison))
	}
	if d.Status == docSaved {
		return nil
	}
	res, err := s.runExtractor(ctx, extract.Input{ID: d.ID, Source: d.Path + d.Key, Title: d.Title, Text: d.Body, Meta: d.Meta})
	if err != nil {
		if errors.Is(err, breaker.ErrOpen) && extractBreaker(s.cfg.Extractor) == nil {
			return s.snoozeWhileOpen(err, "the extractor's breaker is open; the document waits", "doc", d.ID)
		}
		return fmt.Errorf("extract %s%s: %w", d.Path, d.Key, err)
	}
	_, err = s.client.Insert(ctx, saveArgs{Doc: d.ID, File: d.FileID, Version: d.version, Path: d.Path, Key: d.Key, Result: cleanResult(res)},
		&weir.InsertOpts{IdempotencyKey: "save:" + versionKey(d.ID, d.FileID, d.version), Source: d.Path + d.Key})
	return err
}

// save writes the extraction to SQL, the source of truth, with the index
// job in the same transaction; then moves the file to processed/ once all
// its documents are saved or failed. The extraction of a version that a
// newer one has replaced since is dropped.
func (s *Service) save(ctx context.Context, j *weir.Job[saveArgs]) error {
	a := j.Args
	r := a.Result
	terms, err := jsonText(r.KeyTerms)
	if err != nil {
		return retry.Permanent(err)
	}
	var (
		fileID                              = a.File
		requeued, stale                     bool // saved after its failure was requeued; replaced
		failedSource, failedPath, failedKey string
	)
	err = s.db.RunTx(ctx, func(tx appdb.Tx) error {
		var (
			current, status, source, relPath, key string
			version                               int64
		)
		err := tx.QueryRow(ctx, `SELECT file_id, status, source, path, key, version FROM ingest_documents WHERE id = $1`, a.Doc).
			Scan(&current, &status, &source, &relPath, &key, &version)
		if errors.Is(err, sql.ErrNoRows) { // pgx's wraps it too
			stale = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("document %s: %w", a.Doc, err)
		}
		if fileID == "" {
			fileID = current
		}
		if current != fileID || (a.Version != 0 && version != a.Version) {
			stale = true
			return nil
		}
		if status == docSaved {
			return nil
		}
		requeued = status == docFailed
		failedSource, failedPath, failedKey = source, relPath, key
		now := s.cfg.Clock.Now()
		n, err := tx.Exec(ctx, `UPDATE ingest_documents SET status = $2, title = $3, language = $4, word_count = $5, key_terms = $6,
			summary = $7, extractor = $8, index_error = '', indexed_at = 0, updated_at = $9 WHERE id = $1 AND file_id = $10 AND version = $11 AND status <> $2`,
			a.Doc, docSaved, r.Title, r.Language, r.WordCount, terms, r.Summary, r.Extractor, micros(now), fileID, version)
		if err != nil {
			return err
		}
		if n == 0 {
			stale = true
			return nil
		}
		if _, err := s.client.InsertTx(ctx, tx.Ex, indexArgs{Doc: a.Doc, File: fileID}, &weir.InsertOpts{IdempotencyKey: "index:" + versionKey(a.Doc, fileID, version) + ":saved"}); err != nil {
			return err
		}
		return s.event(ctx, tx, Event{Type: EventSaved, Document: a.Doc, File: fileID, Source: source, Path: relPath, Key: key,
			Title: r.Title, Language: r.Language, At: now})
	})
	if err != nil {
		return err
	}
	if stale {
		s.log.Info("extraction of a replaced version dropped: a newer version of the file took the document's place", "doc", a.Doc, "file", a.File)
		return nil
	}
	crashpoint.Hit(crashpoint.PipelineAfterSave)
	if requeued && failedKey != "" {
		// An archive's message, failed, requeued and now saved: its
		// failure's folder goes (a whole file's goes when it settles).
		if err := s.removeAll(ctx, failedDir(failedSource, failedPath, failedKey)); err != nil {
			s.log.Warn("remove the folder of a failure that was requeued and saved", "doc", a.Doc, "err", err)
		}
	}
	s.settleFile(ctx, fileID)
	return nil
}

// maxIndexRounds bounds the writes of one index attempt that chases a
// document changing under it.
const maxIndexRounds = 5

// index brings the index to SQL's state of a document: it writes a saved
// document, deletes one that is gone (a newer version of its file lacks
// it) or failed, and leaves one being processed to the index job that
// follows its save. After a write it reads the document again and writes
// once more if a newer version was saved meanwhile, so that an older
// job's write never has the last word. Its last failed attempt is
// recorded on the document and left to reconciliation. While the index's
// breaker is open the job waits, without spending an attempt.
func (s *Service) index(ctx context.Context, j *weir.Job[indexArgs]) error {
	return s.snoozeWhileOpen(s.indexDoc(ctx, j), "the search index's breaker is open; the document waits", "doc", j.Args.Doc)
}

// snoozeWhileOpen turns a breaker's refusal into a snooze until its next
// probe, which spends no attempt; any other error is returned as it is.
func (s *Service) snoozeWhileOpen(err error, msg string, args ...any) error {
	var open *breaker.OpenError
	if !errors.As(err, &open) {
		return err
	}
	s.log.Warn(msg, append(args, "retry_in", open.RetryIn)...)
	return weir.JobSnooze(max(open.RetryIn, s.cfg.PollEvery))
}

func (s *Service) indexDoc(ctx context.Context, j *weir.Job[indexArgs]) error {
	id := j.Args.Doc
	for range maxIndexRounds {
		d, err := s.db.document(ctx, id)
		gone := errors.Is(err, ErrNotFound)
		if err != nil && !gone {
			return err
		}
		switch {
		case gone || d.Status == docFailed:
			if _, err := s.cfg.Index.Delete(ctx, id); err != nil {
				if j.Attempt < j.MaxAttempts || errors.Is(err, breaker.ErrOpen) {
					return err
				}
				s.log.Warn("index delete failed; the entry waits for reconciliation", "doc", id, "attempt", j.Attempt, "err", err)
			}
			return nil
		case d.Status != docSaved:
			return nil
		}
		if err := s.cfg.Index.Put(ctx, searchDoc(d)); err != nil {
			if j.Attempt < j.MaxAttempts || errors.Is(err, breaker.ErrOpen) {
				return err
			}
			s.log.Warn("index failed; the document waits for reconciliation", "doc", d.ID, "attempt", j.Attempt, "err", err)
			_, uerr := s.db.SQL.ExecContext(ctx, `UPDATE ingest_documents SET index_error = $2 WHERE id = $1 AND updated_at = $3`,
				d.ID, cleanText(err.Error()), micros(d.UpdatedAt))
			return uerr
		}
		n, err := s.db.SQL.ExecContext(ctx, `UPDATE ingest_documents SET index_error = '', indexed_at = $2 WHERE id = $1 AND status = $3 AND updated_at = $4`,
			d.ID, micros(s.cfg.Clock.Now()), docSaved, micros(d.UpdatedAt))
		if err != nil {
			return err
		}
		if k, err := n.RowsAffected(); err != nil || k == 1 {
			return err
		}
		// The document changed while it was written: write it again.
	}
	return fmt.Errorf("document %s changed %d times while it was indexed; the next attempt writes it", id, maxIndexRounds)
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
	if err != nil || f.Status == fileProcessed || f.Status == fileSuperseded {
		return err
	}
	waiting, err := s.db.count(ctx, `SELECT count(*) FROM ingest_documents WHERE file_id = $1 AND status = $2`, fileID, docParsed)
	if err != nil || waiting > 0 {
		return err
	}
	saved, err := s.db.count(ctx, `SELECT count(*) FROM ingest_documents WHERE file_id = $1 AND status = $2`, fileID, docSaved)
	if err != nil {
		return err
	}
	// A version superseded since it was read is left to the newer one.
	mark := func(status string) error {
		_, err := s.db.SQL.ExecContext(ctx, `UPDATE ingest_files SET status = $2, updated_at = $3 WHERE id = $1 AND status <> $4`,
			fileID, status, micros(s.cfg.Clock.Now()), fileSuperseded)
		return err
	}
	src := path.Join(IncomingDir, f.Path)
	if saved == 0 && f.Documents > 0 {
		// Every document failed: the file goes to failed/, beside its
		// documents' failures.
		dir := failedDir(f.Source, f.Path, "")
		if _, err := s.moveIfSame(ctx, src, path.Join(dir, path.Base(f.Path)), f.ETag); err != nil && !errors.Is(err, ErrNotRegular) {
			return err
		}
		return mark(fileFailed)
	}
	dst := path.Join(ProcessedDir, f.Path)
	moved, err := s.moveIfSame(ctx, src, dst, f.ETag)
	if err != nil && !errors.Is(err, ErrNotRegular) {
		return err
	}
	if !moved && f.Status == fileFailed {
		// Requeued from failed/: the original comes back from there.
		dir := failedDir(f.Source, f.Path, "")
		if err := s.rename(ctx, path.Join(dir, path.Base(f.Path)), dst); err != nil {
			return err
		}
		if err := s.removeAll(ctx, dir); err != nil {
			return err
		}
	}
	return mark(fileProcessed)
}

// jsonText is v as JSON text.
func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
