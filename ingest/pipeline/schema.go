package pipeline

import (
	"context"
	"fmt"

	"github.com/weirhq/weir/store/appdb"
)

// Schema is the service's tables, per driver, beside weir's: the files
// seen in incoming/ (a row per version of a path), their documents (the
// source of truth of what is searchable: a row per path and part, holding
// the newest version parsed), the reindex runs, and the failures written
// to failed/. Times are microseconds since the Unix epoch in both
// drivers. A version is ordered by (version, job): the status change time
// of the file its parse read, in nanoseconds, then the parse job's id.
//
// Its statements can run again on a database made by an earlier release;
// the columns added since are added by Migrate.
var Schema = map[appdb.Driver]string{
	appdb.SQLite: `
CREATE TABLE IF NOT EXISTS weir_files (
	id TEXT PRIMARY KEY,
	path TEXT NOT NULL,
	source TEXT NOT NULL,
	etag TEXT NOT NULL,
	format TEXT NOT NULL,
	status TEXT NOT NULL,
	documents INTEGER NOT NULL,
	version INTEGER NOT NULL DEFAULT 0,
	job INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS weir_files_status ON weir_files (status);
CREATE INDEX IF NOT EXISTS weir_files_path ON weir_files (path);
CREATE TABLE IF NOT EXISTS weir_documents (
	id TEXT PRIMARY KEY,
	file_id TEXT NOT NULL,
	key TEXT NOT NULL,
	source TEXT NOT NULL,
	path TEXT NOT NULL,
	status TEXT NOT NULL,
	title TEXT NOT NULL,
	body TEXT NOT NULL,
	meta TEXT NOT NULL,
	language TEXT NOT NULL DEFAULT '',
	word_count INTEGER NOT NULL DEFAULT 0,
	key_terms TEXT NOT NULL DEFAULT '[]',
	summary TEXT NOT NULL DEFAULT '',
	extractor TEXT NOT NULL DEFAULT '',
	index_error TEXT NOT NULL DEFAULT '',
	indexed_at INTEGER NOT NULL DEFAULT 0,
	version INTEGER NOT NULL DEFAULT 0,
	job INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS weir_documents_file ON weir_documents (file_id);
CREATE INDEX IF NOT EXISTS weir_documents_path ON weir_documents (path);
CREATE INDEX IF NOT EXISTS weir_documents_status ON weir_documents (status, id);
CREATE TABLE IF NOT EXISTS weir_reindex_runs (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	trigger TEXT NOT NULL,
	status TEXT NOT NULL,
	started_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	finished_at INTEGER,
	total INTEGER NOT NULL DEFAULT 0,
	checked INTEGER NOT NULL DEFAULT 0,
	missing INTEGER NOT NULL DEFAULT 0,
	stale INTEGER NOT NULL DEFAULT 0,
	extra INTEGER NOT NULL DEFAULT 0,
	repaired INTEGER NOT NULL DEFAULT 0,
	last_id TEXT NOT NULL DEFAULT '',
	error TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS weir_failures (
	dead_letter_id INTEGER PRIMARY KEY,
	dir TEXT NOT NULL,
	written_at INTEGER NOT NULL
);`,
	appdb.Postgres: `
CREATE TABLE IF NOT EXISTS weir_files (
	id TEXT PRIMARY KEY,
	path TEXT NOT NULL,
	source TEXT NOT NULL,
	etag TEXT NOT NULL,
	format TEXT NOT NULL,
	status TEXT NOT NULL,
	documents INTEGER NOT NULL,
	version BIGINT NOT NULL DEFAULT 0,
	job BIGINT NOT NULL DEFAULT 0,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS weir_files_status ON weir_files (status);
CREATE INDEX IF NOT EXISTS weir_files_path ON weir_files (path);
CREATE TABLE IF NOT EXISTS weir_documents (
	id TEXT PRIMARY KEY,
	file_id TEXT NOT NULL,
	key TEXT NOT NULL,
	source TEXT NOT NULL,
	path TEXT NOT NULL,
	status TEXT NOT NULL,
	title TEXT NOT NULL,
	body TEXT NOT NULL,
	meta TEXT NOT NULL,
	language TEXT NOT NULL DEFAULT '',
	word_count INTEGER NOT NULL DEFAULT 0,
	key_terms TEXT NOT NULL DEFAULT '[]',
	summary TEXT NOT NULL DEFAULT '',
	extractor TEXT NOT NULL DEFAULT '',
	index_error TEXT NOT NULL DEFAULT '',
	indexed_at BIGINT NOT NULL DEFAULT 0,
	version BIGINT NOT NULL DEFAULT 0,
	job BIGINT NOT NULL DEFAULT 0,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS weir_documents_file ON weir_documents (file_id);
CREATE INDEX IF NOT EXISTS weir_documents_path ON weir_documents (path);
CREATE INDEX IF NOT EXISTS weir_documents_status ON weir_documents (status, id);
CREATE TABLE IF NOT EXISTS weir_reindex_runs (
	id BIGSERIAL PRIMARY KEY,
	trigger TEXT NOT NULL,
	status TEXT NOT NULL,
	started_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	finished_at BIGINT,
	total INTEGER NOT NULL DEFAULT 0,
	checked INTEGER NOT NULL DEFAULT 0,
	missing INTEGER NOT NULL DEFAULT 0,
	stale INTEGER NOT NULL DEFAULT 0,
	extra INTEGER NOT NULL DEFAULT 0,
	repaired INTEGER NOT NULL DEFAULT 0,
	last_id TEXT NOT NULL DEFAULT '',
	error TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS weir_failures (
	dead_letter_id BIGINT PRIMARY KEY,
	dir TEXT NOT NULL,
	written_at BIGINT NOT NULL
);`,
}

// The statuses of a file and of a document.
const (
	fileParsed    = "parsed"    // its documents are in weir_documents
	fileProcessed = "processed" // moved to processed/
	fileFailed    = "failed"    // its parse was dead-lettered, or all its documents; moved to failed/
	// fileSuperseded: a newer version of its path was parsed before it
	// ended; its documents are the newer version's now.
	fileSuperseded = "superseded"

	docParsed = "parsed" // waiting for extract and save
	docSaved  = "saved"  // the extraction is in SQL: searchable once indexed
	docFailed = "failed" // dead-lettered; in failed/
)

// columnsAdded are the columns added to the service's tables since its
// first release: Migrate adds them to a database made before.
var columnsAdded = []struct{ table, column string }{
	{"weir_files", "version"},
	{"weir_files", "job"},
	{"weir_documents", "version"},
	{"weir_documents", "job"},
}

// Migrate creates the service's tables beside weir's (migrating weir's
// first), and adds to tables made by an earlier release the columns they
// lack. It can run again, and in several processes at once.
func Migrate(ctx context.Context, db *appdb.DB) error {
	if err := db.Migrate(ctx, Schema); err != nil {
		return err
	}
	has := `SELECT count(*) FROM pragma_table_info($1) WHERE name = $2`
	add := `ALTER TABLE %s ADD COLUMN %s INTEGER NOT NULL DEFAULT 0`
	if db.Driver == appdb.Postgres {
		has = `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`
		add = `ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s BIGINT NOT NULL DEFAULT 0`
	}
	for _, c := range columnsAdded {
		var n int
		if err := db.SQL.QueryRowContext(ctx, has, c.table, c.column).Scan(&n); err != nil {
			return fmt.Errorf("pipeline: the columns of %s: %w", c.table, err)
		}
		if n > 0 {
			continue
		}
		if _, err := db.SQL.ExecContext(ctx, fmt.Sprintf(add, c.table, c.column)); err != nil {
			// Another process may have added it first.
			if qerr := db.SQL.QueryRowContext(ctx, has, c.table, c.column).Scan(&n); qerr != nil || n == 0 {
				return fmt.Errorf("pipeline: add %s.%s: %w", c.table, c.column, err)
			}
		}
	}
	return nil
}
