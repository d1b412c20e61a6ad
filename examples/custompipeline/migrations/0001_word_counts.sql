-- The example's table, beside weir's: one row per file counted.
CREATE TABLE wordcount_files (
	path TEXT PRIMARY KEY,
	words BIGINT NOT NULL,
	counted_at BIGINT NOT NULL
);
