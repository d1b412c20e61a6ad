-- The ingestion service's tables, beside weir's: the files seen in
-- incoming/ (a row per version of a path), their documents (the source of
-- truth of what is searchable: a row per path and part, holding the newest
-- version parsed), the reindex runs, and the failures written to failed/.
-- Times are microseconds since the Unix epoch. A version is ordered by
-- (version, job): the status change time of the file its parse read, in
-- nanoseconds, then the parse job's id.
--
-- IF NOT EXISTS: on a database of the release before, the step before this
-- SQL (pipeline's upgradeWeirTables) has renamed its weir_* tables to these.
CREATE TABLE IF NOT EXISTS ingest_files (
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
CREATE INDEX IF NOT EXISTS ingest_files_status ON ingest_files (status);
CREATE INDEX IF NOT EXISTS ingest_files_path ON ingest_files (path);
CREATE TABLE IF NOT EXISTS ingest_documents (
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
CREATE INDEX IF NOT EXISTS ingest_documents_file ON ingest_documents (file_id);
CREATE INDEX IF NOT EXISTS ingest_documents_path ON ingest_documents (path);
CREATE INDEX IF NOT EXISTS ingest_documents_status ON ingest_documents (status, id);
CREATE TABLE IF NOT EXISTS ingest_reindex_runs (
	id {{autoid}},
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
CREATE TABLE IF NOT EXISTS ingest_failures (
	dead_letter_id BIGINT PRIMARY KEY,
	dir TEXT NOT NULL,
	written_at BIGINT NOT NULL
);
