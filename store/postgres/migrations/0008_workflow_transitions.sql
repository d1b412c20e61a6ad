-- The history of each workflow, for operators (the admin API's workflow
-- view). Runs with search_path set to weir's schema.
--
-- CreateWorkflow writes version 1 and every AdvanceWorkflow the version it
-- makes, in the same statement as the change (a data-modifying WITH), so
-- the history holds exactly the committed changes. from_state is empty at
-- creation. Ids compare byte by byte, as weir_workflows' do. Workflows made
-- before this migration have the transitions made after it.
CREATE TABLE weir_workflow_transitions (
    workflow_id text COLLATE "C" NOT NULL CHECK (workflow_id <> ''),
    version     bigint      NOT NULL CHECK (version >= 1),
    from_state  text        NOT NULL,
    state       text        NOT NULL CHECK (state <> ''),
    status      text        NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    error       text        NOT NULL DEFAULT '',
    at          timestamptz NOT NULL,
    PRIMARY KEY (workflow_id, version)
);
