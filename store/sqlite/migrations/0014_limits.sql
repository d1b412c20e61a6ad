-- Limits across processes on the attempts of kinds (see store.Limits):
-- per key, at most max_running attempts running (0: no such limit) and at
-- most rate starts in each window of per microseconds (0: none), the
-- window last counted starting at window_start with window_count starts.
-- Each kind counts against one key at most. Times are INTEGER
-- microseconds since the Unix epoch, UTC.
CREATE TABLE weir_limits (
    key          TEXT    NOT NULL PRIMARY KEY CHECK (key <> ''),
    max_running  INTEGER NOT NULL DEFAULT 0 CHECK (max_running >= 0),
    rate         INTEGER NOT NULL DEFAULT 0 CHECK (rate >= 0),
    per          INTEGER NOT NULL DEFAULT 0 CHECK (per >= 0),
    window_start INTEGER,
    window_count INTEGER NOT NULL DEFAULT 0,
    updated_at   INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE weir_limit_kinds (
    kind TEXT NOT NULL PRIMARY KEY CHECK (kind <> ''),
    key  TEXT NOT NULL REFERENCES weir_limits (key) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE INDEX weir_limit_kinds_key ON weir_limit_kinds (key);

-- The claim counts the running attempts of a limit's kinds: from this
-- index alone, one entry per running job, not from the table.
CREATE INDEX weir_jobs_running_kind ON weir_jobs (kind) WHERE state = 'running';
