package pipeline

import "github.com/weirhq/weir/internal/appdb"

// Schema is the service's tables, per driver, beside weir's: the files
// seen in incoming/, their documents (the source of truth of what is
// searchable), the reindex runs, and the failures written to failed/.
// Times are microseconds since the Unix epoch in both drivers.
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
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS weir_files_status ON weir_files (status);
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
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS weir_documents_file ON weir_documents (file_id);
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
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS weir_files_status ON weir_files (status);
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
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS weir_documents_file ON weir_documents (file_id);
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
	fileFailed    = "failed"    // its parse was dead-lettered; moved to failed/

	docParsed = "parsed" // waiting for extract and save
	docSaved  = "saved"  // the extraction is in SQL: searchable once indexed
	docFailed = "failed" // dead-lettered; in failed/
)
