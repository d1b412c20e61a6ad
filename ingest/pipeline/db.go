package pipeline

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/ingest/reconcile"
	"github.com/weirhq/weir/store/appdb"
)

// ErrNotFound is returned for a document the service does not have.
var ErrNotFound = errors.New("pipeline: not found")

// Document is a document as SQL keeps it.
type Document struct {
	ID     string `json:"id"`
	FileID string `json:"file_id"`
	// ID is DocumentID of the document's path and key: the same for
	// every version of its file. FileID is the version it holds now.
	// Key is the document's place in its file: "" for a file of one
	// document, "#n" for an archive's nth message.
	Key       string            `json:"key,omitempty"`
	Source    string            `json:"source"`
	Path      string            `json:"path"`
	Status    string            `json:"status"`
	Title     string            `json:"title"`
	Body      string            `json:"body,omitempty"`
	Meta      map[string]string `json:"meta,omitempty"`
	Language  string            `json:"language,omitempty"`
	WordCount int               `json:"word_count"`
	KeyTerms  []string          `json:"key_terms,omitempty"`
	Summary   string            `json:"summary,omitempty"`
	Extractor string            `json:"extractor,omitempty"`
	// IndexError is the last failure to index the document, which
	// reconciliation repairs; empty when it is indexed.
	IndexError string    `json:"index_error,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`

	// version is the change time of the file version the document holds
	// (see migrations/0001_tables.sql).
	version int64
}

// dbHandle runs the service's statements.
type dbHandle struct{ *appdb.DB }

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

const documentColumns = `id, file_id, key, source, path, status, title, body, meta, language, word_count, key_terms, summary, extractor, index_error, created_at, updated_at, version`

func scanDocument(row appdb.Row) (Document, error) {
	var (
		d              Document
		meta, terms    string
		created, updat int64
	)
	err := row.Scan(&d.ID, &d.FileID, &d.Key, &d.Source, &d.Path, &d.Status, &d.Title, &d.Body, &meta,
		&d.Language, &d.WordCount, &terms, &d.Summary, &d.Extractor, &d.IndexError, &created, &updat, &d.version)
	if err != nil {
		return Document{}, err
	}
	if err := json.Unmarshal([]byte(meta), &d.Meta); err != nil {
		return Document{}, fmt.Errorf("document %s: meta: %w", d.ID, err)
	}
	if err := json.Unmarshal([]byte(terms), &d.KeyTerms); err != nil {
		return Document{}, fmt.Errorf("document %s: key terms: %w", d.ID, err)
	}
	d.CreatedAt, d.UpdatedAt = fromMicros(created), fromMicros(updat)
	return d, nil
}

// document reads the document id; ErrNotFound if there is none.
func (h dbHandle) document(ctx context.Context, id string) (Document, error) {
	d, err := scanDocument(h.SQL.QueryRowContext(ctx, `SELECT `+documentColumns+` FROM ingest_documents WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Document{}, fmt.Errorf("document %s: %w", id, ErrNotFound)
	}
	return d, err
}

// fileRow is a version of a file of incoming/ as ingest_files keeps it.
type fileRow struct {
	ID, Path, Source, ETag, Format, Status string
	Documents                              int
	// Version and Job order the versions of a path (see migrations/0001_tables.sql).
	Version, Job int64
}

func (h dbHandle) file(ctx context.Context, id string) (fileRow, error) {
	var f fileRow
	err := h.SQL.QueryRowContext(ctx, `SELECT id, path, source, etag, format, status, documents, version, job FROM ingest_files WHERE id = $1`, id).
		Scan(&f.ID, &f.Path, &f.Source, &f.ETag, &f.Format, &f.Status, &f.Documents, &f.Version, &f.Job)
	if errors.Is(err, sql.ErrNoRows) {
		return fileRow{}, fmt.Errorf("file %s: %w", id, ErrNotFound)
	}
	return f, err
}

// savedEntries lists the saved documents after id after, in id order, for
// reconciliation: SQL is the source of truth.
func (h dbHandle) savedEntries(ctx context.Context, after string, limit int) ([]reconcile.Entry, error) {
	rows, err := h.SQL.QueryContext(ctx, `SELECT id, updated_at FROM ingest_documents WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3`, docSaved, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []reconcile.Entry
	for rows.Next() {
		var (
			e  reconcile.Entry
			us int64
		)
		if err := rows.Scan(&e.ID, &us); err != nil {
			return nil, err
		}
		e.UpdatedAt = fromMicros(us)
		out = append(out, e)
	}
	return out, rows.Err()
}

// count runs a count query.
func (h dbHandle) count(ctx context.Context, query string, args ...any) (int, error) {
	var n int
	err := h.SQL.QueryRowContext(ctx, query, args...).Scan(&n)
	return n, err
}

// replaced reports whether a newer version of f's path than f has been
// parsed (f superseded, or a newer one recorded).
func (h dbHandle) replaced(ctx context.Context, f fileRow) (bool, error) {
	if f.Status == fileSuperseded {
		return true, nil
	}
	n, err := h.count(ctx, `SELECT count(*) FROM ingest_files WHERE path = $1 AND id <> $2 AND documents > 0
		AND (version > $3 OR (version = $3 AND job > $4))`, f.Path, f.ID, f.Version, f.Job)
	return n > 0, err
}
