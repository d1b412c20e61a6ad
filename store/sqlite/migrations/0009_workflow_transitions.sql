-- weir_workflow_transitions: the history of each workflow, for operators
-- (the admin API's workflow view). CreateWorkflow writes version 1 and
-- every AdvanceWorkflow the version it makes, in the same transaction as
-- the change, so the history holds exactly the committed changes.
-- from_state is empty at creation. Times are INTEGER microseconds since the
-- Unix epoch, UTC. Workflows made before this migration have the
-- transitions made after it.
CREATE TABLE weir_workflow_transitions (
    workflow_id TEXT    NOT NULL CHECK (workflow_id <> ''),
    version     INTEGER NOT NULL CHECK (version >= 1),
    from_state  TEXT    NOT NULL,
    state       TEXT    NOT NULL CHECK (state <> ''),
    status      TEXT    NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    error       TEXT    NOT NULL DEFAULT '',
    at          INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, version)
) WITHOUT ROWID;
