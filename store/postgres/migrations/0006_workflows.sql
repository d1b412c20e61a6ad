-- Workflows: the persisted contexts of multi-step transactions, and the
-- ledger of the side effects they run outside the database. Runs with
-- search_path set to weir's schema.

-- A workflow is created, with the caller's id, in the caller's
-- transaction, and written at every transition: a transition names the
-- version it starts from, and one UPDATE guarded by that version moves the
-- workflow on, so that two runs of one state cannot both do it. Its ids
-- compare byte by byte (COLLATE "C"), whatever the database's collation,
-- so that listing and paging by id order them as SQLite and Go do. Data is
-- bounded by weirtype.MaxWorkflowData in the driver, not here, so that a
-- change of the bound needs no migration.
CREATE TABLE weir_workflows (
    id         text COLLATE "C" PRIMARY KEY CHECK (id <> ''),
    name       text        NOT NULL CHECK (name <> ''),
    state      text        NOT NULL CHECK (state <> ''),
    status     text        NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'completed', 'failed')),
    data       bytea       NOT NULL DEFAULT '',
    -- 1 at creation, one more at every transition.
    version    bigint      NOT NULL DEFAULT 1 CHECK (version >= 1),
    -- Why it failed; empty otherwise.
    error      text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Listing the running workflows that made no progress since a time. Only
-- the running are indexed: the finished ones, which the table keeps, are
-- left out.
CREATE INDEX weir_workflows_running ON weir_workflows (updated_at)
    WHERE status = 'running';

-- An effect is begun (the row inserted) before it runs and finished (its
-- result set) after. Beginning it again finds the row: finished, its
-- result stands in for running it again; unfinished, a run was cut short
-- between the effect and its result, and attempts counts the begins. The
-- primary key makes the begin one atomic step (INSERT ... ON CONFLICT), and
-- serves the reads of a transaction's effects, by series then ordinal;
-- txn and series compare byte by byte, as workflow ids do.
CREATE TABLE weir_effects (
    txn         text COLLATE "C" NOT NULL CHECK (txn <> ''),
    -- Empty for none.
    series      text COLLATE "C" NOT NULL DEFAULT '',
    -- 0 for an effect alone.
    ordinal     bigint      NOT NULL DEFAULT 0 CHECK (ordinal >= 0),
    attempts    integer     NOT NULL DEFAULT 1 CHECK (attempts >= 1),
    -- The first begin's time.
    started_at  timestamptz NOT NULL,
    -- Both NULL until the effect is finished; the first result is kept.
    finished_at timestamptz,
    result      text,
    CHECK ((finished_at IS NULL) = (result IS NULL)),
    PRIMARY KEY (txn, series, ordinal)
);
