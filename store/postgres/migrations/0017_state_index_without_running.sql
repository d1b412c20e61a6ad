-- Listing jobs by state keeps no entry for running jobs. Every claim wrote
-- an entry of the running attempt into weir_jobs_state and every
-- completion one more of the finished job: a sixth of the index writes
-- of a job's life, for a state whose jobs are as few as the workers and
-- are listed from weir_jobs_lease (running jobs alone) instead. A listing
-- of states without the running one says so (state <> 'running') so that
-- the planner takes this index whatever the parameters. Runs with
-- search_path set to weir's schema; on a large table the index is built
-- again while the migration holds the table.
DROP INDEX weir_jobs_state;
CREATE INDEX weir_jobs_state ON weir_jobs (state, id) WHERE state <> 'running';
