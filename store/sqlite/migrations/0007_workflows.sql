-- weir_workflows: the persisted context of each multi-step transaction,
-- written at every transition so that a restart resumes it from state.
-- id is the caller's (a document's id, say); version grows by one at
-- every transition, which names the version it starts from. Times are
-- INTEGER microseconds since the Unix epoch, UTC; data is the workflow's
-- small user data.
CREATE TABLE weir_workflows (
    id         TEXT    PRIMARY KEY CHECK (id <> ''),
    name       TEXT    NOT NULL CHECK (name <> ''),
    state      TEXT    NOT NULL CHECK (state <> ''),
    status     TEXT    NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    data       BLOB,
    version    INTEGER NOT NULL,
    error      TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Resuming and the timeout sweep: the running workflows, least recently
-- updated first.
CREATE INDEX weir_workflows_running ON weir_workflows (updated_at) WHERE status = 'running';

-- weir_effects: the effect ledger. An effect outside the database is begun
-- (started_at) before it runs and finished (finished_at, result) after; a
-- run that finds it finished uses the result instead of running it again.
-- attempts counts the begins: more than one means a run was cut short
-- between the effect and its result.
CREATE TABLE weir_effects (
    txn         TEXT    NOT NULL CHECK (txn <> ''),
    series      TEXT    NOT NULL,
    ordinal     INTEGER NOT NULL CHECK (ordinal >= 0),
    attempts    INTEGER NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    result      TEXT,
    PRIMARY KEY (txn, series, ordinal)
) WITHOUT ROWID;
